package catalog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// moduleCRD is a CRD file inside a Go module, read from the local module
// cache: the operators whose CRDs the shared corpus does not hold publish
// them in their Go modules.
type moduleCRD struct {
	module, version, path string
}

// moduleCRDs are the CRDs of definitions whose kind the corpus lacks, by
// definition name. The versions are the ones the definitions were written
// from.
var moduleCRDs = map[string]moduleCRD{
	"tfjob":            {"github.com/kubeflow/training-operator", "v1.9.4", "manifests/base/crds/kubeflow.org_tfjobs.yaml"},
	"xgboostjob":       {"github.com/kubeflow/training-operator", "v1.9.4", "manifests/base/crds/kubeflow.org_xgboostjobs.yaml"},
	"jaxjob":           {"github.com/kubeflow/training-operator", "v1.9.4", "manifests/base/crds/kubeflow.org_jaxjobs.yaml"},
	"paddlejob":        {"github.com/kubeflow/training-operator", "v1.9.4", "manifests/base/crds/kubeflow.org_paddlejobs.yaml"},
	"sparkapplication": {"github.com/kubeflow/spark-operator/v2", "v2.4.0", "config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml"},
}

// goModCache is the module cache directory, or "".
func goModCache(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GOMODCACHE"); d != "" {
		return d
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Logf("go env GOMODCACHE: %v", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// loadModuleCRD reads the CRD of gk from m in the module cache. It returns
// nil, with why, when the module is not downloaded; a file that is there
// but holds no CRD of gk fails the test.
func loadModuleCRD(t *testing.T, m moduleCRD, gk schema.GroupKind) (*apiextensionsv1.CustomResourceDefinition, string) {
	t.Helper()
	cache := goModCache(t)
	if cache == "" {
		return nil, "no Go module cache"
	}
	// Module paths here are lower case: no case-encoding needed.
	file := filepath.Join(cache, filepath.FromSlash(m.module)+"@"+m.version, filepath.FromSlash(m.path))
	if _, err := os.Stat(file); err != nil {
		return nil, "module " + m.module + "@" + m.version + " is not in the module cache (go mod download " + m.module + "@" + m.version + " in a scratch module)"
	}
	for _, crd := range crdsInFile(t, file) {
		if crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind {
			return crd, ""
		}
	}
	t.Fatalf("%s holds no CRD of %v", file, gk)
	return nil, ""
}

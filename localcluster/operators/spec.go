// Package operators describes and builds the real operators the in-process
// cluster runs as child processes, without the control plane: a CI step can
// build them before the tests (hack/operators) at the cost of the operators
// alone.
package operators

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Real operators run as child processes, each built from a small module of
// its own under localcluster/operators/<name> (its own go.mod pins the operator and
// the Kubernetes libraries it was released with; the project module could
// not build them). CRDs and webhook manifests are read from the operator's
// module in the module cache, so they always match the binary.
//
// What differs between operators is data, in operators/<name>/operator.yaml
// beside that go.mod, so that adding an operator touches no Go code.
type Spec struct {
	Module      string `json:"module"` // module path required by the go.mod beside it
	MainPackage string `json:"mainPackage"`
	CRDDir      string `json:"crdDir"` // CRD YAML directory inside the module
	// CRDFiles, when set, are the only files of CRDDir installed: for an
	// operator whose CRD directory also holds kinds another operator owns
	// in other versions (the training operator's v1 MPIJob against the MPI
	// operator's v2beta1).
	CRDFiles []string `json:"crdFiles,omitempty"`
	// Webhooks is the kubebuilder webhook manifest inside the module; empty
	// for an operator that runs without webhooks, which is then ready once
	// its health probe answers.
	Webhooks  string `json:"webhooks,omitempty"`
	ConfigAPI string `json:"configAPI,omitempty"` // apiVersion of the operator's Configuration file; empty: none
	// PodLabel: the operator's pod webhooks only see pods carrying this
	// label (the upstream kustomize patches add that objectSelector).
	PodLabel string `json:"podLabel,omitempty"`
	// Args is the command line, with placeholders for what only exists at
	// run time (see placeholders). Operators name these flags
	// differently, and every one must turn off leader election, metrics and
	// probes on fixed ports.
	Args []string `json:"args"`
	// Config is more of the operator's Configuration (a YAML mapping),
	// merged into what StartOperator writes (leader election, metrics,
	// probe and webhook server); it may not set those keys. A caller of
	// StartOperator may pass its own instead.
	Config string `json:"config,omitempty"`
	// SourcePatches change the operator's source for the build (go build
	// -overlay), for what it hard-codes that a local process cannot have
	// (a certificate path under /etc). Each replaces one exact text that
	// must occur once, so a new version that moved it fails the build
	// instead of building unpatched.
	SourcePatches []SourcePatch `json:"sourcePatches,omitempty"`
}

// SourcePatch replaces the text Replace, which must occur exactly once in
// File (a path inside the module), with With.
type SourcePatch struct {
	File    string `json:"file"`
	Replace string `json:"replace"`
	With    string `json:"with"`
}

const specFile = "operator.yaml"

// Run is what exists only once StartOperator runs the operator.
type Run struct {
	Kubeconfig string // the control plane's kubeconfig file
	Config     string // the Configuration file StartOperator writes; empty without configAPI
	// probe is the health probe address: "0" for operators with webhooks,
	// which are ready once their webhook server is.
	Probe string
}

// placeholders are the {{name}}s operator.yaml's args may hold.
var placeholders = map[string]func(Run) string{
	"kubeconfig": func(r Run) string { return r.Kubeconfig },
	"config":     func(r Run) string { return r.Config },
	"probe":      func(r Run) string { return r.Probe },
}

var placeholderRE = regexp.MustCompile(`\{\{([^{}]*)\}\}`)

// Parse decodes and checks an operator.yaml; file only names it
// in errors.
func Parse(file string, data []byte) (Spec, error) {
	var spec Spec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return spec, fmt.Errorf("%s: %w", file, err)
	}
	for _, f := range []struct{ field, value string }{
		{"module", spec.Module}, {"mainPackage", spec.MainPackage}, {"crdDir", spec.CRDDir},
	} {
		if f.value == "" {
			return spec, fmt.Errorf("%s: %s: required", file, f.field)
		}
	}
	if len(spec.Args) == 0 {
		return spec, fmt.Errorf("%s: args: required", file)
	}
	if spec.PodLabel != "" && spec.Webhooks == "" {
		return spec, fmt.Errorf("%s: podLabel: only pod webhooks use it, and webhooks is empty", file)
	}
	if spec.Config != "" && spec.ConfigAPI == "" {
		return spec, fmt.Errorf("%s: config: needs configAPI", file)
	}
	if spec.Config != "" {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(spec.Config), &m); err != nil {
			return spec, fmt.Errorf("%s: config: %w", file, err)
		}
	}
	for i, f := range spec.CRDFiles {
		if f != filepath.Base(f) || !strings.HasSuffix(f, ".yaml") {
			return spec, fmt.Errorf("%s: crdFiles[%d]: %q: must be a .yaml file name in crdDir", file, i, f)
		}
	}
	for i, p := range spec.SourcePatches {
		switch {
		case p.File == "" || p.Replace == "":
			return spec, fmt.Errorf("%s: sourcePatches[%d]: file and replace are required", file, i)
		case filepath.IsAbs(p.File) || strings.HasPrefix(filepath.Clean(p.File), ".."):
			return spec, fmt.Errorf("%s: sourcePatches[%d]: file %q: must be a path inside the module", file, i, p.File)
		}
	}
	if spec.Webhooks != "" && spec.ConfigAPI == "" {
		// The Configuration file is where the webhook server learns its
		// port and certificate.
		return spec, fmt.Errorf("%s: webhooks: needs configAPI", file)
	}
	used := map[string]bool{}
	for i, arg := range spec.Args {
		for _, m := range placeholderRE.FindAllStringSubmatch(arg, -1) {
			if _, ok := placeholders[m[1]]; !ok {
				return spec, fmt.Errorf("%s: args[%d]: unknown placeholder %s (have %s)", file, i, m[0], placeholderList())
			}
			used[m[1]] = true
		}
		if rest := placeholderRE.ReplaceAllString(arg, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return spec, fmt.Errorf("%s: args[%d]: malformed placeholder in %q", file, i, arg)
		}
	}
	switch {
	case !used["kubeconfig"]:
		// Without it the operator would find the caller's kubeconfig and
		// act on a real cluster.
		return spec, fmt.Errorf("%s: args: no {{kubeconfig}}", file)
	case used["config"] && spec.ConfigAPI == "":
		return spec, fmt.Errorf("%s: args: {{config}} needs configAPI", file)
	case !used["config"] && spec.ConfigAPI != "":
		// Otherwise the Configuration that turns off leader election and
		// fixed ports would be written and never read.
		return spec, fmt.Errorf("%s: args: configAPI is set but no arg passes {{config}}", file)
	case !used["probe"] && spec.Webhooks == "" && spec.ConfigAPI == "":
		// Nothing else would tell the operator the port it is waited on.
		return spec, fmt.Errorf("%s: args: no {{probe}}, and without webhooks StartOperator waits on the probe", file)
	}
	return spec, nil
}

func placeholderList() string {
	names := make([]string, 0, len(placeholders))
	for n := range placeholders {
		names = append(names, "{{"+n+"}}")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// command returns the operator's args with their placeholders filled in
// (Parse has checked that each is known).
func (spec Spec) Command(run Run) []string {
	args := make([]string, len(spec.Args))
	for i, arg := range spec.Args {
		args[i] = placeholderRE.ReplaceAllStringFunc(arg, func(m string) string {
			return placeholders[m[2:len(m)-2]](run)
		})
	}
	return args
}

// dir is localcluster/operators in the source tree this package was
// built from: the operator modules are its subdirectories.
func dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("cannot locate localcluster/operators (built with -trimpath?)")
	}
	return filepath.Dir(file), nil
}

// names returns dir and the directories in it with an
// operator.yaml.
func names() (string, []string, error) {
	dir, err := dir()
	if err != nil {
		return "", nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), specFile)); err == nil {
			names = append(names, e.Name())
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", nil, err
		}
	}
	return dir, names, nil // os.ReadDir sorts by name
}

// Operators lists the operators StartOperator can run. When they cannot be
// listed (see names) it lists none, and StartOperator and the other
// operator functions say why.
func Names() []string {
	_, names, err := names()
	if err != nil {
		return nil
	}
	return names
}

// operator reads and checks the named operator's operator.yaml and returns
// it with the operator's directory.
func Get(name string) (Spec, string, error) {
	root, names, err := names()
	if err != nil {
		return Spec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	if !slices.Contains(names, name) {
		return Spec{}, "", fmt.Errorf("unknown operator %q (have %s)", name, strings.Join(names, ", "))
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return Spec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	file := filepath.Join(dir, specFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return Spec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	spec, err := Parse(file, data)
	if err != nil {
		return Spec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	return spec, dir, nil
}

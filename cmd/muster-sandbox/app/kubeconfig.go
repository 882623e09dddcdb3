package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/muster-io/muster/localcluster"
)

// checkOverwrite refuses to replace (and at exit delete) a kubeconfig that
// is not a sandbox's own, such as ~/.kube/config given by mistake.
func checkOverwrite(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s exists and is not a kubeconfig (%v); choose another path", path, err)
	}
	for name := range kc.Contexts {
		// Earlier sandboxes named the context after the harness.
		if name != KubeconfigContext && name != localcluster.KubeconfigContext {
			return fmt.Errorf("--kubeconfig %s exists and has context %q: not a sandbox kubeconfig, refusing to overwrite it; choose another path", path, name)
		}
	}
	return nil
}

// writeKubeconfig writes the control plane's admin kubeconfig (from) to
// path with its cluster, user and context named KubeconfigContext.
func writeKubeconfig(from, path string) error {
	kc, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cur := kc.Contexts[kc.CurrentContext]
	if cur == nil {
		return fmt.Errorf("kubeconfig %s: no current context", from)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[KubeconfigContext] = kc.Clusters[cur.Cluster]
	out.AuthInfos[KubeconfigContext] = kc.AuthInfos[cur.AuthInfo]
	out.Contexts[KubeconfigContext] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: KubeconfigContext, Namespace: cur.Namespace}
	out.CurrentContext = KubeconfigContext
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("kubeconfig dir: %w", err)
	}
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

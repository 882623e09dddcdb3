package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// NativeGroupVersion serves the native PodGroups (KEP-4671) the in-tree
// GangScheduling plugin handles.
const NativeGroupVersion = "scheduling.k8s.io/v1beta1"

// GenericWorkloadGate is the feature gate that turns on the in-tree plugin.
const GenericWorkloadGate = "GenericWorkload"

// DiscoveryTimeout bounds the discovery call: a slow or unreachable apiserver
// must not hold the scheduler's start.
const DiscoveryTimeout = 10 * time.Second

// KubeconfigPath finds the kubeconfig kube-scheduler will use: the
// --kubeconfig flag, else clientConnection.kubeconfig in the --config file.
// "" means in-cluster configuration.
func KubeconfigPath(args []string) (string, error) {
	if v, ok := flagValue(args, "kubeconfig"); ok && v != "" {
		return v, nil
	}
	cfgFile, ok := flagValue(args, "config")
	if !ok || cfgFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(cfgFile)
	if err != nil {
		return "", fmt.Errorf("reading scheduler config %s: %w", cfgFile, err)
	}
	var doc struct {
		ClientConnection struct {
			Kubeconfig string `json:"kubeconfig"`
		} `json:"clientConnection"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("reading scheduler config %s: %w", cfgFile, err)
	}
	p := doc.ClientConnection.Kubeconfig
	if p != "" && !filepath.IsAbs(p) {
		// kube-scheduler resolves it against the working directory too.
		p = filepath.Clean(p)
	}
	return p, nil
}

// flagValue returns the value of --name (or -name) in "--name=v" or
// "--name v" form; the last occurrence wins, as with pflag.
func flagValue(args []string, name string) (string, bool) {
	var val string
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		for _, prefix := range []string{"--" + name, "-" + name} {
			switch {
			case a == prefix && i+1 < len(args):
				val, found = args[i+1], true
				i++
			case strings.HasPrefix(a, prefix+"="):
				val, found = strings.TrimPrefix(a, prefix+"="), true
			}
		}
	}
	return val, found
}

// RestConfig loads the kubeconfig at path, or the in-cluster config for "".
func RestConfig(path string) (*rest.Config, error) {
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// ServesNativePodGroups asks discovery whether the cluster serves
// scheduling.k8s.io/v1beta1 podgroups.
func ServesNativePodGroups(ctx context.Context, d discovery.DiscoveryInterface) (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	go func() {
		list, err := d.ServerResourcesForGroupVersion(NativeGroupVersion)
		if apierrors.IsNotFound(err) {
			ch <- result{false, nil}
			return
		}
		if err != nil {
			ch <- result{false, err}
			return
		}
		for _, r := range list.APIResources {
			if r.Name == "podgroups" {
				ch <- result{true, nil}
				return
			}
		}
		ch <- result{false, nil}
	}()
	select {
	case r := <-ch:
		return r.ok, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("discovering %s: %w", NativeGroupVersion, ctx.Err())
	}
}

// WithFeatureGate returns args with --feature-gates=GenericWorkload=true
// added when serves is true and the operator did not set the gate already
// (an explicit setting, true or false, wins).
func WithFeatureGate(args []string, serves bool) []string {
	if !serves {
		return args
	}
	for i, a := range args {
		v := ""
		switch {
		case strings.HasPrefix(a, "--feature-gates="):
			v = strings.TrimPrefix(a, "--feature-gates=")
		case a == "--feature-gates" && i+1 < len(args):
			v = args[i+1]
		}
		for _, kv := range strings.Split(v, ",") {
			if strings.HasPrefix(strings.TrimSpace(kv), GenericWorkloadGate+"=") {
				return args
			}
		}
	}
	out := append([]string(nil), args...)
	return append(out, "--feature-gates="+GenericWorkloadGate+"=true")
}

// Decide runs discovery for args and returns the args to start with and a
// line for the log. A failed discovery never blocks start: the scheduler then
// runs without the gate.
func Decide(ctx context.Context, args []string, newDiscovery func(*rest.Config) (discovery.DiscoveryInterface, error)) ([]string, string) {
	path, err := KubeconfigPath(args)
	if err != nil {
		return args, fmt.Sprintf("native PodGroup discovery skipped: %v", err)
	}
	cfg, err := RestConfig(path)
	if err != nil {
		return args, fmt.Sprintf("native PodGroup discovery skipped: %v", err)
	}
	d, err := newDiscovery(cfg)
	if err != nil {
		return args, fmt.Sprintf("native PodGroup discovery skipped: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, DiscoveryTimeout)
	defer cancel()
	serves, err := ServesNativePodGroups(ctx, d)
	if err != nil {
		return args, fmt.Sprintf("native PodGroup discovery failed, starting without %s: %v", GenericWorkloadGate, err)
	}
	if !serves {
		return args, fmt.Sprintf("cluster does not serve %s podgroups; %s stays off", NativeGroupVersion, GenericWorkloadGate)
	}
	out := WithFeatureGate(args, true)
	if len(out) == len(args) {
		// The operator's --feature-gates already says; the log must not
		// claim the gate is on when it was set to false.
		return out, fmt.Sprintf("cluster serves %s podgroups; %s as --feature-gates sets it", NativeGroupVersion, GenericWorkloadGate)
	}
	return out, fmt.Sprintf("cluster serves %s podgroups; %s on for the in-tree GangScheduling plugin", NativeGroupVersion, GenericWorkloadGate)
}

// NewDiscovery is the default discovery client factory for Decide.
func NewDiscovery(cfg *rest.Config) (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(cfg)
}

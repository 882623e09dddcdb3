package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster holds the clients the live commands use. Tests build one from
// fake clients.
type Cluster struct {
	// Mapper resolves types as kubectl does (kind, plural, short name,
	// kind.group); from cli-runtime it carries the shortcut expander.
	Mapper  meta.RESTMapper
	Dynamic dynamic.Interface
	// Metadata lists owners as metadata only; nil (fake clusters) falls
	// back to Dynamic.
	Metadata  metadata.Interface
	Kube      kubernetes.Interface
	Discovery discovery.DiscoveryInterface
	// Namespace is the namespace of the current context (or -n), and
	// ExplicitNamespace says whether -n gave it.
	Namespace         string
	ExplicitNamespace bool
}

// namespaceOr is ns when set (-n), else the current context's namespace,
// else "default", as kubectl picks it.
func (c *Cluster) namespaceOr(ns string) string {
	if ns == "" {
		ns = c.Namespace
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ns
}

func newClusterFromFlags(f *genericclioptions.ConfigFlags) (*Cluster, error) {
	// Without a kubeconfig client-go falls back to localhost:8080, and the
	// person sees "connection refused" for what is a missing setup.
	if f.APIServer == nil || *f.APIServer == "" {
		raw, err := f.ToRawKubeConfigLoader().RawConfig()
		if err == nil && len(raw.Clusters) == 0 && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
			return nil, unreachableErrorf("no cluster configured: no kubeconfig found (set KUBECONFIG or --kubeconfig, or use -f FILE to work offline)")
		}
	}
	cfg, err := f.ToRESTConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, unreachableErrorf("no cluster configured: no kubeconfig found (set KUBECONFIG or --kubeconfig, or use -f FILE to work offline)")
		}
		return nil, unreachableErrorf("kubeconfig: %v", err)
	}
	// A CLI waits for a person: fail fast on a dead endpoint.
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	// A describe makes a handful of requests, some of them at once;
	// client-side throttling would only add sleeps (the server has its own
	// fairness).
	cfg.QPS, cfg.Burst = 100, 200
	ns, explicit, err := f.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, unreachableErrorf("kubeconfig: %v", err)
	}
	mapper, err := f.ToRESTMapper()
	if err != nil {
		return nil, unreachableErrorf("discovery: %v", err)
	}
	disc, err := f.ToDiscoveryClient()
	if err != nil {
		return nil, unreachableErrorf("discovery: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, unreachableErrorf("dynamic client: %v", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, unreachableErrorf("metadata client: %v", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, unreachableErrorf("client: %v", err)
	}
	return &Cluster{Mapper: mapper, Dynamic: dyn, Metadata: md, Kube: kube, Discovery: disc, Namespace: ns, ExplicitNamespace: explicit}, nil
}

// apiError gives an error from an API call its exit code: unreachable
// servers exit 5, missing objects 3, the rest 1. what says what was being
// done ("list pods in team-a").
func apiError(what string, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	switch {
	case isUnreachable(err):
		return unreachableErrorf("cluster unreachable: %s: %v", what, err)
	case apierrors.IsNotFound(err):
		return notFoundErrorf("%s: %v", what, err)
	case meta.IsNoMatchError(err):
		return notFoundErrorf("%s: %v", what, err)
	case apierrors.IsUnauthorized(err):
		return invalidErrorf("%s: unauthorized: check the credentials of your kubeconfig context", what)
	case apierrors.IsForbidden(err):
		return invalidErrorf("%s: %v", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isUnreachable(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de) {
		return true
	}
	var dr *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &dr) {
		return false
	}
	// Discovery wraps transport errors in plain strings in places; these
	// markers are the transport's own and stable.
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no such host") || strings.Contains(s, "i/o timeout")
}

// resolvedType is a type argument resolved through the RESTMapper.
type resolvedType struct {
	GVK     schema.GroupVersionKind
	Mapping *meta.RESTMapping
}

// resolveType resolves arg (kind, plural, singular, short name, kind.group,
// resource.version.group) as kubectl does.
func resolveType(mapper meta.RESTMapper, arg string) (*resolvedType, error) {
	full, gr := schema.ParseResourceArg(strings.ToLower(arg))
	var gvk schema.GroupVersionKind
	var err error
	if full != nil {
		gvk, err = mapper.KindFor(*full)
	}
	if full == nil || err != nil {
		gvk, err = mapper.KindFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil, err
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	return &resolvedType{GVK: gvk, Mapping: m}, nil
}

// served reports whether the cluster serves gk and returns the mapping of
// its preferred version, else of one of the versions given.
func served(mapper meta.RESTMapper, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, bool) {
	if m, err := mapper.RESTMapping(gk); err == nil {
		return m, true
	}
	for _, v := range versions {
		if v == "" {
			continue
		}
		if m, err := mapper.RESTMapping(gk, v); err == nil {
			return m, true
		}
	}
	return nil, false
}

// unknownTypeError says a type is unknown and suggests the nearest known
// spelling.
func unknownTypeError(arg string, defs *definitions, c *Cluster) error {
	cands := defs.typeCandidates(c.Mapper, shortNames(c))
	msg := fmt.Sprintf("the cluster has no resource type %q", arg)
	if s := suggest(arg, cands); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	} else {
		msg += fmt.Sprintf(" (defined types: %s)", strings.Join(defs.kindNames(), ", "))
	}
	return notFoundErrorf("%s", msg)
}

// shortNames reads the short names of served resources from discovery
// (cached on disk by cli-runtime). Failures leave them out: they only
// improve suggestions.
func shortNames(c *Cluster) map[schema.GroupResource][]string {
	out := map[schema.GroupResource][]string{}
	if c.Discovery == nil {
		return out
	}
	lists, _ := c.Discovery.ServerPreferredResources()
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if len(r.ShortNames) > 0 {
				out[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = r.ShortNames
			}
		}
	}
	return out
}

// withTimeout bounds one command's API work so a stuck server cannot hang
// a person's terminal.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 2*time.Minute)
}

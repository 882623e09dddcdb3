package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/spf13/cobra"

	"github.com/muster-io/muster/dashboard"
)

const dashboardLong = `Serve a live web view of the cluster: every node's GPUs as cells coloured by
the workload holding them, grouped by topology domain; every workload with a
gang, its members scheduled and ready, and why it waits; and, for the workload
you click, the same describe and fit answers as the CLI.

The dashboard reads with your kubeconfig and RBAC and never writes. It
watches nodes, pods and PodGroups (a change shows within about a second),
keeps no pod's environment, and fetches nothing from the internet: its page
is embedded in this binary, and its Content-Security-Policy lets the page
talk to its own origin only.

It listens on 127.0.0.1 and a free port unless --address says otherwise.
On any address other than a loopback one (0.0.0.0 included) every request
needs the random access token printed once in the URL, as Jupyter does.`

const dashboardExample = `  # Open the dashboard of the current context in a browser
  muster dashboard

  # On a fixed port, without opening a browser
  muster dashboard --address 127.0.0.1:8765 --no-browser

  # Reachable from other machines (the URL printed carries the token)
  muster dashboard --address 0.0.0.0:8765 --no-browser`

// DashboardOptions are the options of "muster dashboard".
type DashboardOptions struct {
	env *Env

	Address   string
	NoBrowser bool
	// Topology are the node label keys the map groups nodes by.
	Topology []string

	// ready, when set, receives the URL once the server listens (tests).
	ready func(url string)

	genericiooptions.IOStreams
}

// defaultTopology are the levels muster's gang topology uses in its
// examples and sandbox, outermost first; a node without one of them is
// grouped with the others that lack it.
var defaultTopology = []string{corev1.LabelTopologyZone, "muster.io/block", "muster.io/rack"}

// NewCmdDashboard returns the dashboard command.
func NewCmdDashboard(env *Env) *cobra.Command {
	o := &DashboardOptions{env: env, Address: "127.0.0.1:0", Topology: defaultTopology, IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "dashboard [--address HOST:PORT] [--no-browser] [--topology KEY,...]",
		DisableFlagsInUseLine: true,
		Short:                 "Serve a live web view of the cluster's GPUs, gangs and why they wait",
		Long:                  dashboardLong,
		Example:               dashboardExample,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Address, "address", o.Address, "HOST:PORT to listen on (port 0: a free one); any non-loopback host requires the printed access token")
	f.BoolVar(&o.NoBrowser, "no-browser", false, "Print the URL without opening a browser")
	f.StringSliceVar(&o.Topology, "topology", o.Topology, "Node label keys the GPU map groups nodes by, outermost first")
	return cmd
}

// Validate checks the flags.
func (o *DashboardOptions) Validate() error {
	if _, _, err := net.SplitHostPort(o.Address); err != nil {
		return usageErrorf("--address %q: want HOST:PORT (%v)", o.Address, err)
	}
	for _, k := range o.Topology {
		if k == "" || strings.ContainsAny(k, " \t") {
			return usageErrorf("--topology %q is not a label key", k)
		}
	}
	return nil
}

// podRole names a gang member's role by the definition its PodGroup
// names: the component and instance describe puts the pod in. A pod no
// component selects, or a definition not known here, has none.
func podRole(ctx context.Context, defs *definitions) func(*corev1.Pod, string) string {
	return func(pod *corev1.Pod, def string) string {
		ent, ok := defs.reg.Get(def)
		if def == "" || !ok || ent.Compiled == nil {
			return ""
		}
		m, err := ent.Compiled.MatchPod(ctx, pod)
		if err != nil {
			return ""
		}
		if m.Instance != "" {
			return m.Component + "/" + m.Instance
		}
		return m.Component
	}
}

// errNotServed: the cluster does not serve the kind.
var errNotServed = errors.New("not served")

// readable says whether the cluster serves gk as gvr and the user may
// list it: a watch that cannot list would hold the page's first snapshot,
// and the page, forever, so each optional watch is listed once first.
func readable(ctx context.Context, c *Cluster, dyn dynamic.Interface, gk schema.GroupKind, gvr schema.GroupVersionResource) error {
	if _, err := c.Mapper.RESTMapping(gk, gvr.Version); err != nil {
		return errNotServed
	}
	if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("cannot list %s (%v)", gvr.GroupResource(), err)
	}
	return nil
}

// kueueSource watches Kueue's Workloads (and LocalQueues, to name the
// ClusterQueue of a workload not yet admitted) when the cluster serves
// them and lets the user list them; nil otherwise, and the page shows no
// queue.
func (o *DashboardOptions) kueueSource(ctx context.Context, c *Cluster, dyn dynamic.Interface) *dashboard.QueueSource {
	if err := readable(ctx, c, dyn, kueueWorkloadGK, kueueWorkloadGVR); err != nil {
		if !errors.Is(err, errNotServed) {
			o.env.warnf("%v: the page shows no queue", err)
		}
		return nil
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	src := &dashboard.QueueSource{Informers: []cache.SharedIndexInformer{f.ForResource(kueueWorkloadGVR).Informer()}}
	var lqs cache.Store
	if readable(ctx, c, dyn, schema.GroupKind{Group: kueueGroup, Kind: "LocalQueue"}, kueueLocalQGVR) == nil {
		inf := f.ForResource(kueueLocalQGVR).Informer()
		src.Informers, lqs = append(src.Informers, inf), inf.GetStore()
	}
	gpus := gpuCount{names: o.env.gpuNames()}
	src.Entry = func(obj any) (dashboard.QueueEntry, bool) {
		return kueueEntry(obj, lqs, gpus)
	}
	return src
}

// kueueEntry reads one Kueue Workload as the page's queue entry, for the
// job that controls it (Kueue's Workloads of plain pod groups, owned by
// each pod, have none and are left out).
func kueueEntry(obj any, localQueues cache.Store, gpus gpuCount) (dashboard.QueueEntry, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return dashboard.QueueEntry{}, false
	}
	ref := metav1.GetControllerOfNoCopy(u)
	if ref == nil {
		return dashboard.QueueEntry{}, false
	}
	in := &kueueInput{Workload: u}
	in.ClusterQueueName, _, _ = unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	if lq, _, _ := unstructured.NestedString(u.Object, "spec", "queueName"); in.ClusterQueueName == "" && lq != "" && localQueues != nil {
		if o, ok, err := localQueues.GetByKey(u.GetNamespace() + "/" + lq); err == nil && ok {
			if q, ok := o.(*unstructured.Unstructured); ok {
				in.ClusterQueueName, _, _ = unstructured.NestedString(q.Object, "spec", "clusterQueue")
			}
		}
	}
	v := queueView(in, gpus, "")
	return dashboard.QueueEntry{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: u.GetNamespace(), Name: ref.Name,
		State: v.State, Admitted: v.State == QueueAdmitted, Finished: v.State == QueueFinished, Summary: v.Summary,
		Created: u.GetCreationTimestamp().Time}, true
}

// Run serves until ctx ends.
func (o *DashboardOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.env.Cluster()
	if err != nil {
		return err
	}
	// The CLI's clients time out after 30 s, which would cut every watch:
	// the dashboard's watches get clients of their own.
	cfg, err := o.env.ConfigFlags.ToRESTConfig()
	if err != nil {
		return unreachableErrorf("kubeconfig: %v", err)
	}
	cfg.Timeout = 0
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pg, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, pgErr := c.Mapper.RESTMapping(schema.GroupKind{Group: "scheduling.x-k8s.io", Kind: "PodGroup"}, "v1alpha1")
	// The definitions name each gang member's role in the hover; read
	// once (a definition changed while the page is open shows its new
	// roles after a restart).
	defs, err := o.env.loadDefinitions(ctx, c)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nativeErr := readable(ctx, c, dyn, nativePodGroupGK, schema.GroupVersionResource{Group: nativePodGroupGK.Group, Version: nativePodGroupVersion, Resource: "podgroups"})
	if nativeErr != nil && !errors.Is(nativeErr, errNotServed) {
		o.env.warnf("%v: native gangs show as pods outside any gang", nativeErr)
	}
	resourceV1 := func(kind, resource string) error {
		return readable(ctx, c, dyn, schema.GroupKind{Group: "resource.k8s.io", Kind: kind}, schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: resource})
	}
	draErr := resourceV1("ResourceSlice", "resourceslices")
	if draErr == nil {
		draErr = resourceV1("ResourceClaim", "resourceclaims")
	}
	if draErr != nil && !errors.Is(draErr, errNotServed) {
		o.env.warnf("%v: GPUs handed out through DRA are not shown", draErr)
	}
	queue := o.kueueSource(ctx, c, dyn)
	live := dashboard.NewLive(kube, pg, dashboard.LiveOptions{Levels: o.Topology, GPUResources: o.env.gpuNames(), WithPodGroups: pgErr == nil,
		WithNativePodGroups: nativeErr == nil, WithDRA: draErr == nil, Queue: queue, Role: podRole(ctx, defs)})
	if pgErr != nil && nativeErr != nil {
		o.env.warnf("the cluster serves neither scheduler-plugins PodGroups nor native ones (scheduling.k8s.io/v1beta1): every pod shows outside any gang")
	}
	if err := live.Start(ctx); err != nil {
		return apiError("watching the cluster", err)
	}

	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return usageErrorf("--address %s: %v", o.Address, err)
	}
	srv := &dashboard.Server{Live: live, Detail: o.detail, Fit: o.verdict}
	url := "http://" + printedAddr(ln.Addr()) + "/"
	if dashboard.NeedsToken(ln.Addr().String()) {
		if srv.Token, err = dashboard.NewToken(); err != nil {
			ln.Close()
			return err
		}
		url += "?token=" + srv.Token
	}
	fmt.Fprintf(o.Out, "muster dashboard: %s\n(Ctrl-C stops it)\n", url)
	if o.ready != nil {
		o.ready(url)
	}
	if !o.NoBrowser {
		if err := openBrowser(url); err != nil {
			o.env.warnf("could not open a browser (%v): open the URL above", err)
		}
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx) // the event streams end with the process
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// detail renders one workload with the CLI's own describe and fit, into
// text: one model, two renderings.
func (o *DashboardOptions) detail(ctx context.Context, apiVersion, kind, namespace, name string) (dashboard.Detail, error) {
	typ, err := o.typeName(apiVersion, kind)
	if err != nil {
		return dashboard.Detail{}, err
	}
	var d dashboard.Detail
	if d.Describe, err = o.run(ctx, "describe", typ+"/"+name, "-n", namespace); err != nil {
		return d, err
	}
	fit, err := o.run(ctx, "fit", typ+"/"+name, "-n", namespace)
	if err != nil {
		d.FitError = err.Error()
	}
	d.Fit = fit
	return d, nil
}

// typeName is the CLI's TYPE for a workload's apiVersion and kind
// (resource.version.group), from the cluster's discovery.
func (o *DashboardOptions) typeName(apiVersion, kind string) (string, error) {
	c, err := o.env.Cluster()
	if err != nil {
		return "", err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	m, err := c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", apiVersion, kind, err)
	}
	typ := m.Resource.Resource
	if gv.Group != "" {
		typ += "." + gv.Version + "." + gv.Group
	}
	return typ, nil
}

// verdict is fit's answer for one workload of the gangs table, from the
// same command the detail runs, in JSON.
func (o *DashboardOptions) verdict(ctx context.Context, apiVersion, kind, namespace, name string) (dashboard.Verdict, error) {
	typ, err := o.typeName(apiVersion, kind)
	if err != nil {
		return dashboard.Verdict{}, err
	}
	out, err := o.run(ctx, "fit", typ+"/"+name, "-n", namespace, "-o", "json")
	if err != nil {
		return dashboard.Verdict{}, err
	}
	var r FitReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return dashboard.Verdict{}, fmt.Errorf("reading fit's answer: %w", err)
	}
	return fitVerdict(&r), nil
}

// fitVerdict says in one line what would let the report's one workload
// start: nothing (it fits now), evicting these, or nothing on this cluster
// and why.
func fitVerdict(r *FitReport) dashboard.Verdict {
	if len(r.Clusters) == 0 || len(r.Clusters[0].Workloads) == 0 {
		return dashboard.Verdict{Verdict: verdictUnknown, Summary: "fit evaluated no workload"}
	}
	cf, w := &r.Clusters[0], &r.Clusters[0].Workloads[0]
	v := dashboard.Verdict{Verdict: w.Verdict}
	var parts []string
	if q := w.Queue; q != nil && !q.Admitted && !q.HasQuota {
		parts = append(parts, "Kueue: "+q.Summary)
	}
	switch w.Verdict {
	case verdictFits:
		nodes := map[string]bool{}
		for _, g := range w.Gangs {
			for _, n := range g.Nodes {
				nodes[n.Name] = true
			}
		}
		parts = append(parts, fmt.Sprintf("fits now, on %d nodes", len(nodes)))
	case verdictPreempt:
		var units []string
		for _, g := range w.Gangs {
			for _, vf := range g.Victims {
				units = append(units, vf.Unit)
			}
		}
		more := ""
		if len(units) > 3 {
			units, more = units[:3], fmt.Sprintf(" and %d more", len(units)-3)
		}
		parts = append(parts, fmt.Sprintf("fits after preempting %d pods (%d GPUs): %s%s", cf.VictimPods, cf.VictimGPUs, strings.Join(units, ", "), more))
	case verdictNoFit:
		msg := "does not fit on this cluster"
		for _, g := range w.Gangs {
			if g.Verdict == verdictNoFit {
				if g.Reason != "" {
					msg += ": " + g.Reason
				}
				if g.Preemption != "" {
					msg += "; " + g.Preemption
				}
				break
			}
		}
		parts = append(parts, msg)
	default:
		msg := w.Verdict
		if w.Note != "" {
			msg += ": " + w.Note
		}
		parts = append(parts, msg)
	}
	v.Summary = strings.Join(parts, "; ")
	return v
}

// run runs one muster command on the dashboard's cluster into a string.
func (o *DashboardOptions) run(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	sub := &Env{
		Streams:      genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		ConfigFlags:  genericclioptions.NewConfigFlags(true),
		Color:        "never",
		GPUResources: o.env.GPUResources,
		NewCluster:   o.env.Cluster,
		Now:          o.env.Now,
		Getenv:       o.env.Getenv,
	}
	cmd := NewRootCommand(sub)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), errors.New(msg)
	}
	if w := strings.TrimSpace(errOut.String()); w != "" {
		out.WriteString("\n" + w + "\n")
	}
	return out.String(), nil
}

// printedAddr is the address to print for a listener: its own, or for one
// on every interface (0.0.0.0, [::]) this machine's host name.
func printedAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return a.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// openBrowser opens url in the desktop's browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

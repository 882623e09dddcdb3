package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/pager"
	fwk "k8s.io/kube-scheduler/framework"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
	"github.com/muster-io/muster/plugins/gang/plan"
)

const fitLong = `Say whether a workload's gangs would fit on a cluster now, after preempting
lower-priority work, or not at all, and where.

For each gang of the workload (the gangs the pod-grouper would create, or the
PodGroups of a workload already submitted): fits now, fits after preempting,
or does not fit; the node chosen for each member, the topology domain when the
workload or PodGroup sets muster.io/topology-required or
muster.io/topology-preferred, the free GPUs of each node before and after,
and, when it does not fit now, the reason in the words muster-scheduler uses.
The gangs of a workload (and the workloads of a file) are placed one after
the other, each on what the previous ones left.

muster fit runs the scheduler plugin's own whole-gang planner
(plugins/gang/plan) on a snapshot of the cluster read with two list calls
(nodes, and pods bound to a node that have not finished); it starts no
informer and writes nothing. Nodes are filtered as kube-scheduler's
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (node selectors and
required node affinity) and NodePorts plugins filter them, with their own
code; resources (CPU, memory, pods, GPUs and every other requested resource)
as the planner counts them. Not evaluated: required inter-pod affinity and
topology spread constraints, volumes, and capacity other gangs' plans hold
in the scheduler's memory.

Preemption: a gang that does not fit now is given the scheduler's victim
search (plugins/gang/victims), on the same snapshot. The gang's priority is
its highest member's: spec.priority of a submitted pod, else the pod
template's priorityClassName resolved with the cluster's PriorityClasses
(none named: the globalDefault class, else 0), raised to what the
pod-grouper recorded on the PodGroup; preemptionPolicy Never on any member
means no preemption. Victims are whole units of strictly lower priority:
every bound pod of a gang (muster, native or another mechanism's), a pod in
no gang, or one extra of an elastic gang above its quorum; the cheapest set
that lets the gang fit (no PodDisruptionBudget violated, no gang broken,
lower priority, fewer pods, fewer GPUs, younger first). "fits after
preempting" lists those units and the placement once they are gone;
"does not fit" says, in the scheduler's words, why preempting would not
help. What the scheduler then chooses can differ when the cluster changes
in between, or when other gangs' plans hold room. --no-preemption asks only
"fits now".

With several --context flags every cluster is evaluated and ranked: clusters
where every gang fits now first, then those where every gang fits after
preempting (the fewest pods evicted, then the fewest GPUs, first), then the
rest; within each, the fewest nodes left with a partly allocated set of GPUs
after the placement (fragmentation: a node with some but not all of its GPUs
in use can take only smaller members later), then the order given. A
cluster that cannot be read is listed last with its error.

TYPE/NAME reads a submitted workload (its pending members are placed, its bound
members stay where they are); with several contexts it is read from the first
one and its spec is evaluated on the others as with -f.

The exit code is 0 whenever the report is printed, whether the gangs fit or
not (read "verdict" in -o json); with several contexts, also when some cannot
be read, as long as one can.

RBAC, read-only: list nodes (cluster-wide) and list pods (all namespaces);
when a gang does not fit now, also list priorityclasses,
poddisruptionbudgets (all namespaces) and podgroups (all namespaces; without
them the search knows no elastic extras, and says so); with TYPE/NAME also
get the workload and list pods and PodGroups in its namespace; the cluster's
Kartas are listed when readable.`

const fitExample = `  # Would this manifest fit on the current cluster now, and where?
  muster fit -f train.yaml

  # A workload already submitted (pending or partly bound)
  muster fit jobset/train -n team-a

  # Rank clusters: where does it fit now, leaving the least fragmentation?
  muster fit -f train.yaml --context prod-a --context prod-b --context lab

  # Only "fits now": do not evaluate what the gangs would preempt
  muster fit -f train.yaml --no-preemption

  # For a placer: the same as JSON (schema in cli/README.md)
  muster fit -f train.yaml --context prod-a --context prod-b -o json

  # GPUs under another resource name
  muster fit -f train.yaml --gpu-resource gpu.intel.com/i915`

// What the report says about preemption: evaluated as muster-scheduler
// would preempt, or not (--no-preemption: a gang that fits only after
// evicting others shows as not fitting).
const (
	preemptionEvaluated = "evaluated"
	preemptionOff       = "not evaluated"
)

// Verdicts, as the table and JSON say them.
const (
	verdictFits    = "fits now"
	verdictPreempt = "fits after preempting"
	verdictNoFit   = "does not fit"
	verdictNoGang  = "no gang"
	verdictUnknown = "not evaluated"
)

// FitOptions are the options of "muster fit".
type FitOptions struct {
	env *Env

	Filename  string
	Contexts  []string
	Output    string
	Namespace string
	// NoPreemption asks only whether the gangs fit now.
	NoPreemption bool

	typeArg, nameArg string

	genericiooptions.IOStreams
}

// NewCmdFit returns the fit command.
func NewCmdFit(env *Env) *cobra.Command {
	o := &FitOptions{env: env, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "fit (-f FILE | TYPE/NAME | TYPE NAME) [--context NAME]... [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Say whether a workload's gangs fit now or after preempting, on which nodes, and rank clusters",
		Long:                  fitLong,
		Example:               fitExample,
		ValidArgsFunction:     completeTypeAndName(env),
		RunE:                  runOptions(o),
	}
	f := cmd.Flags()
	f.StringVarP(&o.Filename, "filename", "f", "", "Evaluate the workload(s) of this manifest (\"-\" for stdin)")
	// Shadows the global --context: one context works as everywhere else,
	// several are evaluated and ranked.
	f.StringArrayVar(&o.Contexts, "context", nil, "Kubeconfig context to evaluate; repeat to rank several clusters")
	f.BoolVar(&o.NoPreemption, "no-preemption", false, "Only say whether the gangs fit now: do not evaluate what they would preempt")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// preemption is what the report says about preemption.
func (o *FitOptions) preemption() string {
	if o.NoPreemption {
		return preemptionOff
	}
	return preemptionEvaluated
}

// Complete fills the options from the arguments.
func (o *FitOptions) Complete(args []string) error {
	var err error
	if o.typeArg, o.nameArg, err = typeAndName("fit", args); err != nil {
		return err
	}
	o.Namespace = *o.env.ConfigFlags.Namespace
	return nil
}

// typeAndName reads the TYPE/NAME or TYPE NAME arguments of a command
// (both empty without arguments).
func typeAndName(command string, args []string) (typ, name string, err error) {
	switch len(args) {
	case 0:
		return "", "", nil
	case 1:
		typ, name, _ = strings.Cut(args[0], "/")
		return typ, name, nil
	case 2:
		return args[0], args[1], nil
	}
	return "", "", usageErrorf("%s takes TYPE/NAME or TYPE NAME, got %d arguments", command, len(args))
}

// Validate checks the combination of arguments and flags.
func (o *FitOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	switch {
	case o.Filename != "" && o.typeArg != "":
		return usageErrorf("give either -f FILE or TYPE/NAME, not both")
	case o.Filename == "" && o.typeArg == "":
		return usageErrorf("fit needs -f FILE or TYPE/NAME (see \"muster fit --help\")")
	case o.typeArg != "" && o.nameArg == "":
		return usageErrorf("fit needs a name: %s/NAME or %s NAME", o.typeArg, o.typeArg)
	}
	seen := map[string]bool{}
	for _, c := range o.Contexts {
		if c == "" {
			return usageErrorf("--context needs a name")
		}
		if seen[c] {
			return usageErrorf("--context %s given twice", c)
		}
		seen[c] = true
	}
	if len(o.Contexts) > 1 && *o.env.ConfigFlags.APIServer != "" {
		return usageErrorf("--server names one cluster; it cannot be combined with several --context flags")
	}
	return nil
}

// fitClusterFor builds the clients of one kubeconfig context when fit
// evaluates several; tests replace it with fake clusters.
var fitClusterFor = func(env *Env, kubeContext string) (*Cluster, error) {
	return newClusterFromFlags(flagsForContext(env.ConfigFlags, kubeContext))
}

// flagsForContext copies what the user set on the command line that holds for
// every cluster (kubeconfig file, namespace, cache, timeouts) and selects
// kubeContext. Cluster, user and credential overrides are not copied: they
// belong to one cluster.
func flagsForContext(f *genericclioptions.ConfigFlags, kubeContext string) *genericclioptions.ConfigFlags {
	out := genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50)
	for _, p := range []struct{ dst, src *string }{
		{out.KubeConfig, f.KubeConfig}, {out.Namespace, f.Namespace}, {out.CacheDir, f.CacheDir}, {out.Timeout, f.Timeout},
	} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	*out.Context = kubeContext
	out.WrapConfigFn = f.WrapConfigFn // Ctrl-C ends every cluster's requests
	return out
}

// Run evaluates the workload on every cluster asked for and prints the
// report.
func (o *FitOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var objs []*unstructured.Unstructured
	if o.Filename != "" {
		data, err := o.env.readInput(o.Filename)
		if err != nil {
			return err
		}
		if objs, err = decodeObjects(o.Filename, data, false); err != nil {
			return err
		}
	}
	contexts := o.Contexts
	if len(contexts) == 1 {
		*o.env.ConfigFlags.Context = contexts[0]
	}
	if len(contexts) <= 1 {
		c, err := o.env.Cluster()
		if err != nil {
			return err
		}
		name := ""
		if len(contexts) == 1 {
			name = contexts[0]
		} else if o.env.NewCluster == nil {
			if raw, err := o.env.ConfigFlags.ToRawKubeConfigLoader().RawConfig(); err == nil {
				name = raw.CurrentContext
			}
		}
		cf, _, err := o.evaluate(ctx, name, c, objs, nil)
		if err != nil {
			return err
		}
		return o.print(rankClusters([]*ClusterFit{cf}, o.preemption()))
	}

	var clusters []*ClusterFit
	var firstErr error
	var root *unstructured.Unstructured // a live workload, read from the first context
	for _, name := range contexts {
		c, err := fitClusterFor(o.env, name)
		var cf *ClusterFit
		if err == nil {
			cf, root, err = o.evaluate(ctx, name, c, objs, root)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			var ee *ExitError
			if errors.As(err, &ee) && ee.Code == ExitUsage {
				return err // the input, not the cluster: every context would say so
			}
			o.env.warnf("context %s: %v", name, err)
			cf = &ClusterFit{Context: name, Error: oneLine(err.Error()), Verdict: "error", Workloads: []WorkloadFit{}, Warnings: []string{}}
		}
		clusters = append(clusters, cf)
	}
	ok := false
	for _, cf := range clusters {
		ok = ok || cf.Error == ""
	}
	if !ok {
		return firstErr
	}
	return o.print(rankClusters(clusters, o.preemption()))
}

// evaluate places the workloads on one cluster. root, when set, is a live
// workload read from another cluster, evaluated here from its spec; the
// workload read live here is returned for the next clusters.
func (o *FitOptions) evaluate(ctx context.Context, name string, c *Cluster, objs []*unstructured.Unstructured, root *unstructured.Unstructured) (*ClusterFit, *unstructured.Unstructured, error) {
	defs, err := o.env.loadDefinitions(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	ns := o.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	var workloads []*fitWorkload
	var warnings []string
	switch {
	case objs != nil:
		workloads, warnings, err = o.fileWorkloads(ctx, objs, defs, ns)
	case root != nil:
		var w *fitWorkload
		w, err = specWorkload(ctx, root.DeepCopy(), defs, ns, "spec")
		workloads = []*fitWorkload{w}
	default:
		var w *fitWorkload
		w, err = o.liveWorkload(ctx, c, defs, ns)
		if w != nil {
			workloads, root = []*fitWorkload{w}, w.root
		}
	}
	if err != nil {
		return nil, nil, err
	}
	snap, err := takeSnapshot(ctx, c, o.env.gpuNames())
	if err != nil {
		return nil, nil, err
	}
	snap.preemption = !o.NoPreemption
	cf, err := snap.place(ctx, workloads)
	if err != nil {
		return nil, nil, err
	}
	cf.Context = name
	cf.Warnings = append(cf.Warnings, warnings...)
	return cf, root, nil
}

// fitWorkload is one workload to place: its gangs in the order they are
// placed.
type fitWorkload struct {
	root   *unstructured.Unstructured
	ns     string
	def    string
	source string // "file", "live" or "spec"
	gangs  []*fitGang
	note   string
}

// fitGang is one gang to place, as the scheduler plugin sees it.
type fitGang struct {
	name       string // the PodGroup's name, or a stand-in for a grouped gang not created yet
	podGroup   string // "" when the name is not known before the pods exist
	definition string
	// key is "namespace/name", the way the plugin names the gang in its
	// messages.
	key       string
	minMember int
	pending   []*corev1.Pod
	placed    []string // nodes of bound members
	bound     []*corev1.Pod
	topology  plan.Topology
	// recorded is the priority the pod-grouper recorded on a live
	// PodGroup, with its class.
	recorded      *int32
	recordedClass string
	// blocked is a reason known without planning: the scheduler would not
	// plan the gang either (PodGroup missing), or fit cannot tell its
	// members.
	blocked string
	// blockedVerdict is the verdict that goes with blocked.
	blockedVerdict string
}

// fileWorkloads picks the workloads of a manifest: the objects whose kind
// has a definition (a Pod only when it is the file's only workload).
func (o *FitOptions) fileWorkloads(ctx context.Context, objs []*unstructured.Unstructured, defs *definitions, ns string) ([]*fitWorkload, []string, error) {
	var roots, pods []*unstructured.Unstructured
	var skipped []string
	for _, obj := range objs {
		if _, err := defs.forGVK(obj.GroupVersionKind()); err != nil {
			skipped = append(skipped, obj.GetKind()+"/"+obj.GetName())
			continue
		}
		if obj.GetKind() == "Pod" && obj.GroupVersionKind().Group == "" {
			pods = append(pods, obj)
			continue
		}
		roots = append(roots, obj)
	}
	if len(roots) == 0 {
		roots = pods
	}
	if len(roots) == 0 {
		var kinds []string
		for _, obj := range objs {
			kinds = append(kinds, obj.GetKind())
		}
		_, err := defs.forGVK(objs[0].GroupVersionKind())
		return nil, nil, withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", o.Filename, strings.Join(kinds, ", "), err))
	}
	var warnings []string
	if len(skipped) > 0 {
		warnings = append(warnings, fmt.Sprintf("not evaluated (no definition, or pods of a workload in the file): %s", strings.Join(skipped, ", ")))
	}
	var out []*fitWorkload
	docRefs := offlineRefs(objs)
	for _, r := range roots {
		rctx := ctx
		if ent, err := defs.forGVK(r.GroupVersionKind()); err == nil {
			var refWarnings []string
			rctx, refWarnings = docRefs.bind(ctx, ent.Compiled, r)
			warnings = append(warnings, refWarnings...)
		}
		w, err := specWorkload(rctx, r, defs, ns, "file")
		if err != nil {
			return nil, nil, err
		}
		out = append(out, w)
	}
	return out, warnings, nil
}

// specWorkload derives the gangs of a workload from its spec alone.
func specWorkload(ctx context.Context, root *unstructured.Unstructured, defs *definitions, ns, source string) (*fitWorkload, error) {
	ent, err := defs.forGVK(root.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if root.GetNamespace() != "" {
		ns = root.GetNamespace()
	}
	w := &fitWorkload{root: root, ns: ns, def: ent.Name, source: source}
	w.gangs, err = specGangs(ctx, root, ent, ns)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// memberTemplate is one pod template of a gang instance and how many of
// its pods one instance has.
type memberTemplate struct {
	label string
	tpl   *corev1.PodTemplateSpec
	n     int64
}

// specGangs makes the gangs the pod-grouper would create for root, with
// member pods built from the pod templates. A whole-workload gang gets every
// pod of its counted components; a grouped gang's instances share those
// pods equally, which holds when the definition yields one plan for it (all
// scope instances alike). When the scope instances differ, fit cannot tell
// which pods form which gang from the spec, and says so.
func specGangs(ctx context.Context, root *unstructured.Unstructured, ent *catalog.Entry, ns string) ([]*fitGang, error) {
	c := ent.Compiled
	plans, err := c.GangPlans(ctx, root)
	if err != nil {
		return nil, invalidErrorf("%s %s: gangs: %v", root.GetKind(), root.GetName(), err)
	}
	if len(plans) == 0 {
		return nil, nil
	}
	wl, err := c.Extract(ctx, root)
	if err != nil {
		return nil, invalidErrorf("%s %s: %v", root.GetKind(), root.GetName(), err)
	}
	comps := map[string]*definition.Component{}
	children := map[string][]string{}
	for i := range wl.Components {
		comp := &wl.Components[i]
		comps[comp.Name] = comp
		children[comp.Parent] = append(children[comp.Parent], comp.Name)
	}
	instances, plansPer := map[string]int{}, map[string]int{}
	for _, p := range plans {
		instances[p.Definition] += p.Instances
		plansPer[p.Definition]++
	}
	var out []*fitGang
	for _, gp := range plans {
		total := int64(instances[gp.Definition])
		derivable := plansPer[gp.Definition] == 1 && total > 0
		var members []memberTemplate
		for _, cn := range countedComponents(gp.Members, comps, children) {
			for _, in := range comps[cn].Instances {
				if in.Template == nil || in.Pods == 0 {
					continue
				}
				if in.Pods%total != 0 {
					derivable = false
				}
				label := in.ID
				if label == "" {
					label = cn
				}
				members = append(members, memberTemplate{label: label, tpl: in.Template, n: in.Pods / total})
			}
		}
		pgName, whole := naming.WholeWorkloadName(root.GetName(), c.Definition(), gp.Definition)
		if oi := c.Definition().Spec.OptimizationInstructions; !whole && (oi == nil || oi.GangScheduling == nil) {
			// The whole-workload gang muster.io/min-member makes on a kind
			// the definition does not gang: named as the pod-grouper names it.
			pgName, whole = naming.PodGroupName(root.GetName(), c.Definition(), gp.Definition, nil), true
		}
		topo := plan.Topology{Key: gp.TopologyPreferred}
		if gp.TopologyRequired != "" {
			topo = plan.Topology{Key: gp.TopologyRequired, Required: true}
		}
		for i := range gp.Instances {
			g := &fitGang{definition: gp.Definition, minMember: max(int(gp.MinMember), 1), topology: topo}
			if whole && gp.Instances == 1 {
				g.name, g.podGroup = pgName, pgName
			} else {
				// One PodGroup per key, named after pod values the spec does
				// not hold: a stand-in name, index by index.
				g.name = fmt.Sprintf("%s-%s[%d]", root.GetName(), gp.Definition, len(out))
			}
			g.key = ns + "/" + g.name
			if !derivable {
				g.blocked, g.blockedVerdict = fmt.Sprintf("the %d instances of gang %q differ in size; fit cannot tell from the spec which pods form which one (submit the workload and run muster fit %s/%s)",
					total, gp.Definition, strings.ToLower(root.GetKind()), root.GetName()), verdictUnknown
			} else {
				g.pending = memberPods(members, root, ns, g.name, i)
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// countedComponents are the pod-bearing components a gang counts: each
// member with pods, else its pod-bearing descendants (as the definition
// engine counts them).
func countedComponents(members []string, comps map[string]*definition.Component, children map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(string)
	walk = func(n string) {
		comp := comps[n]
		if comp == nil {
			return
		}
		if comp.HasPods {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
			return
		}
		for _, ch := range children[n] {
			walk(ch)
		}
	}
	for _, m := range members {
		walk(m)
	}
	return out
}

// memberPods builds the pending members of one gang instance from the
// templates, defaulted as the API server would default the pods (requests
// from limits), with names for people ("workers-1") and unique UIDs.
func memberPods(members []memberTemplate, root *unstructured.Unstructured, ns, gang string, instance int) []*corev1.Pod {
	var out []*corev1.Pod
	for _, m := range members {
		for k := range m.n {
			p := &corev1.Pod{
				ObjectMeta: *m.tpl.ObjectMeta.DeepCopy(),
				Spec:       *m.tpl.Spec.DeepCopy(),
			}
			p.Namespace = ns
			p.Name = fmt.Sprintf("%s-%d", m.label, k)
			p.UID = types.UID(fmt.Sprintf("fit/%s/%s/%d/%s/%d", root.GetUID(), gang, instance, m.label, k))
			corev1defaults.SetObjectDefaults_Pod(p)
			out = append(out, p)
		}
	}
	return out
}

// liveWorkload reads a submitted workload and its gangs: the PodGroups its
// pods are labelled with, each with every live pod of the namespace
// labelled for it (the plugin's members), its PodGroup's min-member and
// topology. A workload whose pods are not labelled yet is evaluated from
// its spec.
func (o *FitOptions) liveWorkload(ctx context.Context, c *Cluster, defs *definitions, ns string) (*fitWorkload, error) {
	rt, err := resolveType(c.Mapper, o.typeArg)
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("discover types", err)
		}
		return nil, unknownTypeError(o.typeArg, defs, c)
	}
	ent, err := defs.forGVK(rt.GVK)
	if err != nil {
		return nil, err
	}
	f := startLiveFetch(ctx, c, rt.Mapping, ns, o.nameArg)
	if f.namespaced {
		f.owners.prefetch(ctx, ns, childKinds(ent.Compiled.Definition()))
	}
	root, err := f.waitRoot(rt, o.nameArg, ns)
	if err != nil {
		return nil, err
	}
	ctx, refWarnings := liveRefs(c).bind(ctx, ent.Compiled, root)
	for _, msg := range refWarnings {
		o.env.warnf("%s %s: %s", root.GetKind(), root.GetName(), msg)
	}
	f.wg.Wait()
	if !f.namespaced {
		return specWorkload(ctx, root, defs, ns, "spec")
	}
	if f.podsErr != nil {
		return nil, apiError("list pods in "+ns, f.podsErr)
	}
	mine, err := workloadPods(ctx, f.owners, root, f.pods)
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range mine {
		if n := p.Labels[api.LabelPodGroup]; n != "" && !seen[n] && p.Spec.SchedulingGroup == nil {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		w, err := specWorkload(ctx, root, defs, ns, "spec")
		if err == nil && len(w.gangs) > 0 {
			w.note = "no pod is in a PodGroup yet: the gangs are the ones the spec yields"
		}
		return w, err
	}
	if f.podGroupsErr != nil {
		return nil, apiError("list PodGroups in "+ns, f.podGroupsErr)
	}
	pgs := map[string]*unstructured.Unstructured{}
	for i := range f.podGroups {
		pgs[f.podGroups[i].GetName()] = &f.podGroups[i]
	}
	sort.Strings(names)
	w := &fitWorkload{root: root, ns: ns, def: ent.Name, source: "live"}
	for _, n := range names {
		g := &fitGang{name: n, podGroup: n, key: ns + "/" + n, minMember: 1}
		for i := range f.pods {
			p := &f.pods[i]
			if p.Labels[api.LabelPodGroup] != n || p.Spec.SchedulingGroup != nil || !plan.Live(p) {
				continue
			}
			if p.Spec.NodeName != "" {
				g.placed = append(g.placed, p.Spec.NodeName)
				g.bound = append(g.bound, p)
			} else {
				g.pending = append(g.pending, p)
			}
		}
		pg := pgs[n]
		if pg == nil {
			// The plugin's own words when it has no PodGroup.
			g.blocked, g.blockedVerdict = plan.PodGroupNotFound(g.key), verdictNoFit
			w.gangs = append(w.gangs, g)
			continue
		}
		g.definition = pg.GetLabels()[api.LabelDefinition]
		if prio, ok := api.PodGroupPriority(pg.GetAnnotations()); ok {
			g.recorded, g.recordedClass = &prio, pg.GetAnnotations()[api.AnnotationPriorityClass]
		}
		if mm, ok, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); ok && mm > 1 {
			g.minMember = int(mm)
		}
		if k := pg.GetAnnotations()[api.AnnotationTopologyRequired]; k != "" {
			g.topology = plan.Topology{Key: k, Required: true}
		} else if k := pg.GetAnnotations()[api.AnnotationTopologyPreferred]; k != "" {
			g.topology = plan.Topology{Key: k}
		}
		w.gangs = append(w.gangs, g)
	}
	return w, nil
}

// fitSnapshot is the cluster as the scheduler's cache holds it: every node
// with the pods bound to it that have not finished. Gangs fit places are
// added to it, so each gang sees what the previous ones left.
type fitSnapshot struct {
	infos    []fwk.NodeInfo
	byName   map[string]*framework.NodeInfo
	gpuNames []corev1.ResourceName
	pods     int
	// added are the pods fit placed: they do not exist, and are never
	// victims.
	added map[types.UID]bool

	// preemption: a gang that does not fit now is searched victims for.
	preemption bool
	cluster    *Cluster
	lists      *preemptionLists
}

// fitPageSize bounds one list response; a cluster of 10,000 pods is read
// in 20 pages.
const fitPageSize = 500

// takeSnapshot lists the nodes and the bound, unfinished pods.
func takeSnapshot(ctx context.Context, c *Cluster, gpuNames []corev1.ResourceName) (*fitSnapshot, error) {
	s := &fitSnapshot{byName: map[string]*framework.NodeInfo{}, gpuNames: gpuNames, added: map[types.UID]bool{}, cluster: c}
	var nodes []*corev1.Node
	np := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, opts)
	}))
	np.PageSize = fitPageSize
	if err := np.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Errorf("list nodes: got %T", obj)
		}
		nodes = append(nodes, n)
		return nil
	}); err != nil {
		return nil, apiError("list nodes", err)
	}
	// The scheduler's own selection of the pods that take room: assigned
	// to a node and not finished (terminating pods still hold theirs).
	byNode := map[string][]*corev1.Pod{}
	pp := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	}))
	pp.PageSize = fitPageSize
	sel := "spec.nodeName!=,status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
	if err := pp.EachListItem(ctx, metav1.ListOptions{FieldSelector: sel}, func(obj runtime.Object) error {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("list pods: got %T", obj)
		}
		// Fake clients ignore field selectors: check again.
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return nil
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		return nil
	}); err != nil {
		return nil, apiError("list pods", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		ni := framework.NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		s.infos = append(s.infos, ni)
		s.byName[n.Name] = ni
		s.pods += len(byNode[n.Name])
	}
	return s, nil
}

// gpus returns the allocatable and free GPUs of a node.
func (s *fitSnapshot) gpus(ni fwk.NodeInfo) (alloc, free int64) {
	a, r := ni.GetAllocatable().GetScalarResources(), ni.GetRequested().GetScalarResources()
	for _, n := range s.gpuNames {
		alloc += a[n]
		free += a[n] - r[n]
	}
	return alloc, free
}

// totals sums GPUs over the cluster: allocatable, free, and nodes whose
// GPUs are partly allocated.
func (s *fitSnapshot) totals() (alloc, free int64, partial int) {
	for _, ni := range s.infos {
		a, f := s.gpus(ni)
		alloc += a
		free += max(f, 0)
		if a > 0 && f > 0 && f < a {
			partial++
		}
	}
	return alloc, free, partial
}

// place places every gang of every workload in order and reports.
func (s *fitSnapshot) place(ctx context.Context, workloads []*fitWorkload) (*ClusterFit, error) {
	filter, err := newSchedulerFilter(ctx)
	if err != nil {
		return nil, err
	}
	cf := &ClusterFit{Nodes: len(s.infos), BoundPods: s.pods, Fits: true, Workloads: []WorkloadFit{}, Warnings: []string{}}
	cf.GPUs, cf.GPUsFree, cf.PartialGPUNodes = s.totals()
	// fitsSome: every gang so far fits now or after preempting.
	fitsSome := true
	for _, w := range workloads {
		wf := WorkloadFit{Kind: w.root.GetKind(), APIVersion: w.root.GetAPIVersion(), Namespace: w.ns, Name: w.root.GetName(),
			Definition: w.def, Source: w.source, Note: w.note, Fits: true, Gangs: []GangFit{}}
		wfSome := true
		for _, g := range w.gangs {
			gf, err := s.placeGang(ctx, g, filter)
			if err != nil {
				return nil, err
			}
			wf.Fits = wf.Fits && gf.Fits
			wfSome = wfSome && (gf.Fits || gf.FitsAfterPreempting)
			for _, v := range gf.Victims {
				cf.VictimUnits++
				cf.VictimPods += v.Pods
				cf.VictimGPUs += v.GPUs
			}
			wf.Gangs = append(wf.Gangs, gf)
		}
		wf.FitsAfterPreempting = !wf.Fits && wfSome
		switch {
		case len(w.gangs) == 0:
			wf.Verdict = verdictNoGang
			wf.Note = "no gang: muster-scheduler places its pods one by one; fit evaluates gangs only"
		case wf.Fits:
			wf.Verdict = verdictFits
		case wf.FitsAfterPreempting:
			wf.Verdict = verdictPreempt
		default:
			wf.Verdict = verdictNoFit
		}
		cf.Fits = cf.Fits && wf.Fits
		fitsSome = fitsSome && wfSome
		cf.Workloads = append(cf.Workloads, wf)
	}
	cf.FitsAfterPreempting = !cf.Fits && fitsSome
	cf.Verdict = clusterVerdict(cf)
	if s.lists != nil {
		cf.Warnings = append(cf.Warnings, s.lists.warnings...)
	}
	_, cf.GPUsFreeAfter, cf.PartialGPUNodesAfter = s.totals()
	return cf, nil
}

// placeGang runs the planner for one gang and, when it fits, adds its
// members to the snapshot on their nodes.
func (s *fitSnapshot) placeGang(ctx context.Context, g *fitGang, filter plan.Filter) (GangFit, error) {
	gf := GangFit{Name: g.name, PodGroup: g.podGroup, Definition: g.definition, MinMember: g.minMember,
		Members: len(g.pending) + len(g.placed), Bound: len(g.placed), Assignments: []MemberFit{}, Nodes: []NodeFit{}, Victims: []VictimFit{}}
	if g.topology.Key != "" {
		gf.Topology = &TopologyFit{Key: g.topology.Key, Required: g.topology.Required}
	}
	if n := len(g.pending) + len(g.placed); g.blocked == "" && n < g.minMember {
		// The plugin does not plan a gang whose members do not all exist
		// yet; its own words.
		g.blocked = plan.WaitingForMembers(g.key, n, g.minMember)
		g.blockedVerdict = verdictUnknown
	}
	if g.blocked != "" {
		gf.Verdict, gf.Reason = g.blockedVerdict, g.blocked
		return gf, nil
	}
	req := plan.Request{
		Gang: g.key, MinMember: g.minMember, Pending: g.pending, Placed: g.placed,
		Nodes: s.infos, Topology: g.topology, Filter: filter,
	}
	res, err := plan.Compute(ctx, req)
	// before: free GPUs per node before the gang (and its victims);
	// evicted: GPUs its victims free there.
	before, evicted := map[string]int64{}, map[string]int64{}
	var noPlace *plan.NoPlacementError
	switch {
	case errors.As(err, &noPlace):
		gf.Verdict, gf.Reason = verdictNoFit, noPlace.Message
		if !s.preemption {
			return gf, nil
		}
		// Free GPUs before the victims go: the node table shows both.
		for _, ni := range s.infos {
			_, before[ni.Node().Name] = s.gpus(ni)
		}
		if res, err = s.preempt(ctx, g, req, &gf); err != nil || res == nil {
			return gf, err
		}
		gf.FitsAfterPreempting, gf.Verdict = true, verdictPreempt
	case err != nil:
		return gf, err
	default:
		gf.Fits, gf.Verdict = true, verdictFits
	}
	if gf.Topology != nil {
		gf.Topology.Domain, gf.Topology.Relaxed = res.Domain, res.Relaxed
	}
	perNode := map[string][]string{}
	for _, p := range g.pending {
		node, ok := res.Assignments[p.UID]
		if !ok {
			continue
		}
		ni := s.byName[node]
		if _, seen := before[node]; !seen {
			_, before[node] = s.gpus(ni)
		}
		if _, seen := evicted[node]; !seen {
			_, free := s.gpus(ni)
			evicted[node] = free - before[node]
		}
		bound := p.DeepCopy()
		bound.Spec.NodeName = node
		ni.AddPod(bound)
		s.added[bound.UID] = true
		gpus := definition.GPUs(definition.PodRequests(&p.Spec), s.gpuNames)
		gf.Assignments = append(gf.Assignments, MemberFit{Pod: p.Name, Node: node, GPUs: gpus})
		perNode[node] = append(perNode[node], p.Name)
	}
	sort.SliceStable(gf.Assignments, func(i, j int) bool { return gf.Assignments[i].Node < gf.Assignments[j].Node })
	for node, members := range perNode {
		ni := s.byName[node]
		alloc, after := s.gpus(ni)
		nf := NodeFit{Name: node, GPUs: alloc, GPUsFree: before[node], GPUsFreed: evicted[node], GPUsFreeAfter: after, Members: members}
		if g.topology.Key != "" {
			nf.Domain = ni.Node().Labels[g.topology.Key]
		}
		gf.Nodes = append(gf.Nodes, nf)
	}
	sort.Slice(gf.Nodes, func(i, j int) bool { return gf.Nodes[i].Name < gf.Nodes[j].Name })
	return gf, nil
}

// schedulerFilter is the plan.Filter of fit: the Filter plugins of
// kube-scheduler that judge a pod against one node from the pod and the
// node alone, run with their own code (with PreFilter where they have one),
// once per shape and node as the planner asks. It stands in for the plugin's
// profileFilter, which runs the whole profile through the framework; the
// plugins needing a cluster-wide view (InterPodAffinity, PodTopologySpread,
// volumes) are left out. The planner checks resources itself.
type schedulerFilter struct {
	plugins []fwk.FilterPlugin
	states  map[*plan.Shape]*shapeFilterState
}

type shapeFilterState struct {
	state fwk.CycleState
	// skip[i]: plugin i's PreFilter said its Filter has nothing to check.
	skip    []bool
	allowed sets.Set[string] // nil: every node
	ok      bool
}

func newSchedulerFilter(ctx context.Context) (*schedulerFilter, error) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	type ctor func(context.Context, runtime.Object, fwk.Handle, feature.Features) (fwk.Plugin, error)
	f := &schedulerFilter{states: map[*plan.Shape]*shapeFilterState{}}
	for _, c := range []struct {
		new  ctor
		args runtime.Object
	}{
		{nodeunschedulable.New, nil},
		{nodename.New, nil},
		{tainttoleration.New, nil},
		{nodeaffinity.New, &schedconfig.NodeAffinityArgs{}},
		{nodeports.New, nil},
	} {
		pl, err := c.new(ctx, c.args, nil, fts)
		if err != nil {
			return nil, fmt.Errorf("scheduler filter: %w", err)
		}
		fp, ok := pl.(fwk.FilterPlugin)
		if !ok {
			return nil, fmt.Errorf("scheduler filter: %s is not a Filter plugin", pl.Name())
		}
		f.plugins = append(f.plugins, fp)
	}
	return f, nil
}

func (f *schedulerFilter) shape(ctx context.Context, s *plan.Shape) *shapeFilterState {
	if st, ok := f.states[s]; ok {
		return st
	}
	st := &shapeFilterState{state: framework.NewCycleState(), skip: make([]bool, len(f.plugins)), ok: true}
	for i, pl := range f.plugins {
		pre, ok := pl.(fwk.PreFilterPlugin)
		if !ok {
			continue
		}
		res, status := pre.PreFilter(ctx, st.state, s.Pod, nil)
		switch {
		case status.IsSkip():
			st.skip[i] = true
		case !status.IsSuccess():
			st.ok = false
		}
		if res != nil && !res.AllNodes() {
			if st.allowed == nil {
				st.allowed = res.NodeNames.Clone()
			} else {
				st.allowed = st.allowed.Intersection(res.NodeNames)
			}
		}
	}
	f.states[s] = st
	return st
}

// Check implements plan.Filter. The planner calls it from one goroutine
// (no Parallelize), so the shape cache needs no lock.
func (f *schedulerFilter) Check(ctx context.Context, s *plan.Shape, ni fwk.NodeInfo, _ []fwk.PodInfo) bool {
	st := f.shape(ctx, s)
	if !st.ok || (st.allowed != nil && !st.allowed.Has(ni.Node().Name)) {
		return false
	}
	for i, pl := range f.plugins {
		if st.skip[i] {
			continue
		}
		if !pl.Filter(ctx, st.state, s.Pod, ni).IsSuccess() {
			return false
		}
	}
	return true
}

// rankClusters orders clusters best first and numbers them: fits now, then
// fits after preempting (the fewest pods, then GPUs, evicted first), then
// does not fit; within each, the fewest nodes with partly allocated GPUs
// after placement, then the order given; clusters with an error last.
func rankClusters(cs []*ClusterFit, preemption string) *FitReport {
	class := func(c *ClusterFit) int {
		switch {
		case c.Error != "":
			return 3
		case c.Fits:
			return 0
		case c.FitsAfterPreempting:
			return 1
		}
		return 2
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if ca, cb := class(a), class(b); ca != cb {
			return ca < cb
		}
		if a.FitsAfterPreempting && a.VictimPods != b.VictimPods {
			return a.VictimPods < b.VictimPods
		}
		if a.FitsAfterPreempting && a.VictimGPUs != b.VictimGPUs {
			return a.VictimGPUs < b.VictimGPUs
		}
		return a.PartialGPUNodesAfter < b.PartialGPUNodesAfter
	})
	r := &FitReport{Preemption: preemption, Clusters: make([]ClusterFit, len(cs))}
	for i, c := range cs {
		c.Rank = i + 1
		r.Clusters[i] = *c
	}
	return r
}

// FitReport is the JSON and YAML output of muster fit (stable: fields are
// added, never renamed). cli/README.md documents every field.
type FitReport struct {
	// Preemption is "evaluated" (a gang that does not fit now is searched
	// victims for, as muster-scheduler would) or "not evaluated"
	// (--no-preemption: a gang that would fit only by evicting others
	// shows as not fitting).
	Preemption string `json:"preemption"`
	// Clusters are ranked, best first.
	Clusters []ClusterFit `json:"clusters"`
}

// ClusterFit is the verdict on one cluster.
type ClusterFit struct {
	Rank int `json:"rank"`
	// Context is the kubeconfig context ("" when unknown).
	Context string `json:"context"`
	// Error is set when the cluster could not be evaluated; the rest is
	// then empty.
	Error string `json:"error,omitempty"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or
	// "error".
	Verdict string `json:"verdict"`
	// Fits: every gang of every workload fits now.
	Fits bool `json:"fits"`
	// FitsAfterPreempting: not every gang fits now, but every one does,
	// some after preempting their Victims.
	FitsAfterPreempting bool `json:"fitsAfterPreempting"`
	// VictimUnits, VictimPods and VictimGPUs sum the gangs' victims: what
	// the ranking minimises among clusters that fit after preempting.
	VictimUnits int   `json:"victimUnits"`
	VictimPods  int   `json:"victimPods"`
	VictimGPUs  int64 `json:"victimGPUs"`
	Nodes       int   `json:"nodes"`
	BoundPods   int   `json:"boundPods"`
	GPUs        int64 `json:"gpus"`
	GPUsFree    int64 `json:"gpusFree"`
	// GPUsFreeAfter and PartialGPUNodesAfter are after placing the gangs
	// that fit.
	GPUsFreeAfter int64 `json:"gpusFreeAfter"`
	// PartialGPUNodes counts nodes with some but not all GPUs allocated:
	// the fragmentation the ranking minimises.
	PartialGPUNodes      int           `json:"partialGPUNodes"`
	PartialGPUNodesAfter int           `json:"partialGPUNodesAfter"`
	Workloads            []WorkloadFit `json:"workloads"`
	Warnings             []string      `json:"warnings"`
}

// WorkloadFit is the verdict on one workload.
type WorkloadFit struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Definition string `json:"definition"`
	// Source: "file" (-f), "live" (the PodGroups and pods of a submitted
	// workload) or "spec" (a submitted workload's spec: no pod in a
	// PodGroup yet, or read from another context).
	Source string `json:"source"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or "no
	// gang".
	Verdict string `json:"verdict"`
	Fits    bool   `json:"fits"`
	// FitsAfterPreempting: some gang fits only after preempting, every
	// other fits now.
	FitsAfterPreempting bool      `json:"fitsAfterPreempting"`
	Note                string    `json:"note,omitempty"`
	Gangs               []GangFit `json:"gangs"`
}

// GangFit is the verdict on one gang.
type GangFit struct {
	// Name is the PodGroup's name; for a grouped gang not created yet a
	// stand-in "<workload>-<gang>[i]" (PodGroup is then "").
	Name       string `json:"name"`
	PodGroup   string `json:"podGroup"`
	Definition string `json:"definition"`
	MinMember  int    `json:"minMember"`
	// Members counts the gang's pods; Bound those already on a node.
	Members int `json:"members"`
	Bound   int `json:"bound"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or
	// "not evaluated".
	Verdict string `json:"verdict"`
	// Fits: the gang fits now.
	Fits bool `json:"fits"`
	// FitsAfterPreempting: the gang fits once Victims are evicted;
	// Assignments and Nodes are the placement then.
	FitsAfterPreempting bool `json:"fitsAfterPreempting"`
	// Reason is the scheduler's message when the gang does not fit now.
	Reason string `json:"reason,omitempty"`
	// Priority and PriorityClass are the gang's, as the scheduler would
	// read them; set when preemption was evaluated for the gang.
	Priority      *int32 `json:"priority,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
	// Preemption says why nothing would be preempted for a gang that does
	// not fit now, in the scheduler's words ("preemption would not help:
	// ...", "not preempting: preemptionPolicy is Never"), or why it was not
	// evaluated.
	Preemption string `json:"preemption,omitempty"`
	// Victims are the units muster-scheduler would evict, whole, for a
	// gang that fits after preempting.
	Victims     []VictimFit  `json:"victims"`
	Topology    *TopologyFit `json:"topology,omitempty"`
	Assignments []MemberFit  `json:"assignments"`
	Nodes       []NodeFit    `json:"nodes"`
}

// TopologyFit is a gang's domain constraint and the domain chosen.
type TopologyFit struct {
	Key      string `json:"key"`
	Required bool   `json:"required"`
	// Domain is the label value all members got ("" when relaxed).
	Domain string `json:"domain"`
	// Relaxed: a preferred constraint no single domain could meet.
	Relaxed bool `json:"relaxed"`
}

// MemberFit is one pending member and its node.
type MemberFit struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	GPUs int64  `json:"gpus"`
}

// NodeFit is one node the gang uses, with its GPUs before and after the
// gang's members.
type NodeFit struct {
	Name     string `json:"name"`
	Domain   string `json:"domain,omitempty"`
	GPUs     int64  `json:"gpus"`
	GPUsFree int64  `json:"gpusFree"`
	// GPUsFreed are the GPUs the gang's victims free on the node.
	GPUsFreed     int64    `json:"gpusFreed,omitempty"`
	GPUsFreeAfter int64    `json:"gpusFreeAfter"`
	Members       []string `json:"members"`
}

func (o *FitOptions) print(r *FitReport) error {
	switch o.Output {
	case "json", "yaml":
		return printData(o.Out, o.Output, r)
	}
	p := newPainter(o.env, o.Out)
	wide := o.Output == "wide"
	if len(r.Clusters) > 1 {
		if err := renderRanking(o.Out, p, r); err != nil {
			return err
		}
	}
	for i := range r.Clusters {
		if len(r.Clusters) > 1 {
			fmt.Fprintln(o.Out)
		}
		if err := renderClusterFit(o.Out, p, &r.Clusters[i], r.Preemption, wide); err != nil {
			return err
		}
	}
	return nil
}

func (p painter) verdict(v string) string {
	switch v {
	case verdictFits:
		return p.paint(ansiGreen, v)
	case verdictNoFit:
		return p.paint(ansiRed, v)
	}
	return p.paint(ansiYellow, v)
}

func clusterVerdict(c *ClusterFit) string {
	switch {
	case c.Error != "":
		return "error"
	case c.Fits:
		return verdictFits
	case c.FitsAfterPreempting:
		return verdictPreempt
	}
	return verdictNoFit
}

func contextName(c *ClusterFit) string {
	if c.Context == "" {
		return "(current context)"
	}
	return c.Context
}

func renderRanking(w io.Writer, p painter, r *FitReport) error {
	t := &table{}
	t.addPlain("RANK", "CONTEXT", "VERDICT", "PREEMPTS", "GPUS FREE", "PARTIAL GPU NODES", "NODES", "ERROR")
	for i := range r.Clusters {
		c := &r.Clusters[i]
		v := clusterVerdict(c)
		if c.Error != "" {
			t.add(plain(fmt.Sprint(c.Rank)), plain(contextName(c)), painted(v, p.bad(v)), plain("-"), plain("-"), plain("-"), plain("-"), plain(c.Error))
			continue
		}
		preempts := "-"
		if c.VictimUnits > 0 {
			preempts = fmt.Sprintf("%d pods, %d GPUs", c.VictimPods, c.VictimGPUs)
		}
		t.add(plain(fmt.Sprint(c.Rank)), plain(contextName(c)), painted(v, p.verdict(v)), plain(preempts),
			plain(fmt.Sprintf("%d → %d", c.GPUsFree, c.GPUsFreeAfter)),
			plain(fmt.Sprintf("%d → %d", c.PartialGPUNodes, c.PartialGPUNodesAfter)),
			plain(fmt.Sprint(c.Nodes)), plain(""))
	}
	if err := t.write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "Preemption: %s. Ranked: fits now, then fits after preempting (the fewest pods, then GPUs, evicted first), then does not fit; then the fewest nodes left with GPUs partly allocated.\n", r.Preemption)
	return err
}

// fitMembersShown caps the member names per node in the table (-o wide
// shows them all).
const fitMembersShown = 4

func renderClusterFit(w io.Writer, p painter, c *ClusterFit, preemption string, wide bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", p.bold("Context:"), contextName(c))
	if c.Error != "" {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Error:"), p.bad(c.Error))
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "%s %d nodes, %d bound pods; %d of %d GPUs free, %s with GPUs partly allocated\n",
		p.bold("Snapshot:"), c.Nodes, c.BoundPods, c.GPUsFree, c.GPUs, plural(int64(c.PartialGPUNodes), "node"))
	v := clusterVerdict(c)
	fmt.Fprintf(&b, "%s %s (preemption: %s)\n", p.bold("Verdict:"), p.verdict(v), preemption)
	if c.VictimUnits > 0 {
		fmt.Fprintf(&b, "%s %s of %d pods, %d GPUs\n", p.bold("Preempts:"), plural(int64(c.VictimUnits), "unit"), c.VictimPods, c.VictimGPUs)
	}
	for _, wf := range c.Workloads {
		fmt.Fprintf(&b, "\n%s %s/%s (definition %s): %s\n", wf.Kind, wf.Namespace, wf.Name, wf.Definition, p.verdict(wf.Verdict))
		if wf.Note != "" {
			fmt.Fprintf(&b, "  %s\n", p.dim(wf.Note))
		}
		for _, g := range wf.Gangs {
			renderGangFit(&b, p, g, wide)
		}
	}
	fmt.Fprintf(&b, "\n%s %d of %d GPUs free, %s with GPUs partly allocated\n", p.bold("After:"), c.GPUsFreeAfter, c.GPUs, plural(int64(c.PartialGPUNodesAfter), "node"))
	for _, warn := range c.Warnings {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Warning:"), warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renderGangFit(b *strings.Builder, p painter, g GangFit, wide bool) {
	name := "Gang " + g.Name
	if g.PodGroup == "" {
		name += " (PodGroup named by the pod-grouper)"
	}
	fmt.Fprintf(b, "  %s: %s; min-member %d, %d members", name, p.verdict(g.Verdict), g.MinMember, g.Members)
	if g.Bound > 0 {
		fmt.Fprintf(b, " (%d bound)", g.Bound)
	}
	if g.Priority != nil {
		fmt.Fprintf(b, "; priority %d", *g.Priority)
		if g.PriorityClass != "" {
			fmt.Fprintf(b, " (%s)", g.PriorityClass)
		}
	}
	b.WriteString("\n")
	if t := g.Topology; t != nil {
		mode := "preferred"
		if t.Required {
			mode = "required"
		}
		fmt.Fprintf(b, "    Topology: %s %s", t.Key, mode)
		switch {
		case t.Relaxed:
			b.WriteString(": no single domain has room, spread over several")
		case t.Domain != "":
			fmt.Fprintf(b, ": %s", t.Domain)
		}
		b.WriteString("\n")
	}
	if g.Reason != "" {
		label := "Reason:"
		if g.FitsAfterPreempting {
			label = "Now:"
		}
		fmt.Fprintf(b, "    %s %s\n", label, g.Reason)
	}
	if g.Preemption != "" {
		fmt.Fprintf(b, "    Preemption: %s\n", g.Preemption)
	}
	renderVictims(b, g.Victims, wide)
	if len(g.Nodes) == 0 {
		return
	}
	t := &table{indent: "    "}
	head := []string{"NODE"}
	if g.Topology != nil {
		head = append(head, "DOMAIN")
	}
	t.addPlain(append(head, "GPUS FREE", "MEMBERS")...)
	for _, n := range g.Nodes {
		row := []string{n.Name}
		if g.Topology != nil {
			row = append(row, n.Domain)
		}
		members := n.Members
		extra := ""
		if !wide && len(members) > fitMembersShown {
			extra = fmt.Sprintf(" … (+%d)", len(members)-fitMembersShown)
			members = members[:fitMembersShown]
		}
		free := fmt.Sprintf("%d → %d of %d", n.GPUsFree, n.GPUsFreeAfter, n.GPUs)
		if n.GPUsFreed > 0 {
			free = fmt.Sprintf("%d +%d freed → %d of %d", n.GPUsFree, n.GPUsFreed, n.GPUsFreeAfter, n.GPUs)
		}
		t.addPlain(append(row, free, strings.Join(members, ", ")+extra)...)
	}
	_ = t.write(b)
}

// fitVictimsShown caps the victim rows in the table (-o wide shows them
// all).
const fitVictimsShown = 10

// renderVictims is the table of the units a gang would preempt.
func renderVictims(b *strings.Builder, vs []VictimFit, wide bool) {
	if len(vs) == 0 {
		return
	}
	pods, gpus := 0, int64(0)
	for _, v := range vs {
		pods += v.Pods
		gpus += v.GPUs
	}
	fmt.Fprintf(b, "    Preempts %s: %d pods, %d GPUs, each evicted whole\n", plural(int64(len(vs)), "unit"), pods, gpus)
	t := &table{indent: "    "}
	t.addPlain("KIND", "VICTIM", "PODS", "GPUS", "PRIORITY", "NODES")
	shown := vs
	if !wide && len(vs) > fitVictimsShown {
		shown = vs[:fitVictimsShown]
	}
	for _, v := range shown {
		kind := v.Kind
		if v.Mechanism != "" && v.Mechanism != "muster" {
			kind += " (" + v.Mechanism + ")"
		}
		name := v.Namespace + "/" + v.Name
		if v.Gang != "" {
			name += " of gang " + v.Gang
		}
		if v.ViolatesPDB {
			name += " (violates its PodDisruptionBudget)"
		}
		nodes := v.Nodes
		extra := ""
		if len(nodes) > fitMembersShown {
			extra = fmt.Sprintf(" … (+%d)", len(nodes)-fitMembersShown)
			nodes = nodes[:fitMembersShown]
		}
		t.addPlain(kind, name, fmt.Sprint(v.Pods), fmt.Sprint(v.GPUs), fmt.Sprint(v.Priority), strings.Join(nodes, ", ")+extra)
	}
	_ = t.write(b)
	if len(shown) < len(vs) {
		fmt.Fprintf(b, "    … %d more (-o wide shows them all)\n", len(vs)-len(shown))
	}
}

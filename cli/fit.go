package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
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
informer and writes nothing. Each node is judged by the PreFilter and Filter
plugins of the scheduler profile muster-scheduler runs, built with
kube-scheduler's own in-tree plugins from the configuration muster's
manifests install (or --scheduler-config FILE), the way the plugin judges
them (plugins/gang/planfilter): taints, node affinity and selectors, host
ports, inter-pod affinity and anti-affinity, topology spread, volumes.
Members whose pod affinity, anti-affinity, topology spread or host ports
bear on each other are judged one after the other, each with the members
placed before it counted, as the scheduler sees them when it reserves them.
Resources (CPU, memory, pods, GPUs and every other requested resource) as
the planner counts them. Namespaces are listed only when an affinity term
selects namespaces by label; persistent volume claims, volumes, storage
classes and CSI nodes only when a member mounts a claim. Pods nominated to
a node (a preemptor waiting for its victims) hold their room there, as the
scheduler's filters count them. Not evaluated, and named in the report:
DRA resource claims and plugins not built into kube-scheduler; nor is the
capacity other gangs' plans hold in the scheduler's memory. fit -f judges
the pods as their templates write them: labels a controller adds to its
pods (a Job's job-name) are known only on a submitted workload (TYPE/NAME).

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

Native gangs: the pods of a submitted workload that name a native PodGroup
(scheduling.k8s.io/v1beta1, spec.schedulingGroup) form a gang of that
PodGroup's minCount, its members every pod naming it, its priority the
PodGroup's spec.priority, its topology the PodGroup's required one (muster's
topology annotations are not the in-tree plugin's). The default scheduler's
GangScheduling plugin places such a gang all or nothing, as muster's does;
fit judges it with the same planner, filters and victim search, so where the
two differ (the in-tree preemption orders its victims its own way) the
scheduler may decide otherwise. A native PodGroup that does not exist yet, or
fewer pods than minCount, is said in the words of the scheduler, which holds
the members until then.

The exit code is 0 whenever the report is printed, whether the gangs fit or
not (read "verdict" in -o json); with several contexts, also when some cannot
be read, as long as one can.

RBAC, read-only: list nodes (cluster-wide) and list pods (all namespaces);
when a gang does not fit now, also list priorityclasses,
poddisruptionbudgets (all namespaces) and podgroups (all namespaces; without
them the search knows no elastic extras, and says so); namespaces, and
persistentvolumeclaims, persistentvolumes, storageclasses and csinodes, when
the members need them as said above; with TYPE/NAME also
get the workload and list pods, PodGroups and native PodGroups
(podgroups.scheduling.k8s.io, where served) in its namespace; the cluster's
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
	// SchedulerConfig is a KubeSchedulerConfiguration file to judge with
	// instead of the shipped one.
	SchedulerConfig string

	sched *schedProfile

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
	f.StringVar(&o.SchedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration to judge with (its only profile, else muster-scheduler's); default: the one muster's manifests install")
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
	data, source, err := o.schedulerConfig()
	if err != nil {
		return err
	}
	if o.sched, err = loadFitProfile(data, source); err != nil {
		return err
	}
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
			cf = &ClusterFit{Context: name, Error: oneLine(err.Error()), Verdict: "error", Workloads: []WorkloadFit{}, Warnings: []string{}, NotEvaluated: []string{}}
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
	snap.preemption, snap.sched = !o.NoPreemption, o.sched
	cf, err := snap.place(ctx, workloads)
	if err != nil {
		return nil, nil, err
	}
	cf.Context = name
	cf.Warnings = append(cf.Warnings, warnings...)
	for i, w := range workloads {
		if i < len(cf.Workloads) {
			cf.Workloads[i].Queue = kueueFit(ctx, c, w.root, w.ns, w.gpuNeeds(ctx, defs, o.env.gpuNames()))
		}
	}
	return cf, root, nil
}

package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

const describeLong = `Show a workload as its components (roles), their instances and pods.

For each pod: ready or not (and why not), node and GPUs. For each gang: the
PodGroup, its min-member, how many members are bound, its priority (as the
pod-grouper records it), for an elastic gang (more members than min-member) the
quorum and the extras apart ("quorum 2/2 bound, extras 1/3 bound"), its phase,
and when it is pending what the scheduler says. A resources table sums replicas,
GPUs, CPU and memory per component.

Native gangs: a gang whose pods name a Kubernetes PodGroup
(scheduling.k8s.io/v1beta1, spec.schedulingGroup.podGroupName; the pod-grouper
writes them in native mode, the default scheduler places them) is shown by
that PodGroup: its minCount, API "native", its members scheduled and ready
("2 of 3 members scheduled, 1 ready", counted from the pods), its phase from
the PodGroupInitiallyScheduled condition, and when pending the condition's
message with the newest FailedScheduling event of a member. A native PodGroup
labelled with the workload's UID is shown before its pods exist. On a cluster
that does not serve that API nothing changes.

TYPE is what kubectl accepts: kind, plural, short name (where the CRD defines
one) or kind.group (jobset, jobsets, jobset.jobset.x-k8s.io). muster finds the
definition for the kind in the cluster's Karta objects, then in its embedded
catalog.

With -f the view is built offline from a manifest: the tree from the spec alone
and the gangs the pod-grouper would create. --definition tries a definition you
are writing instead of the catalog's; --pods attributes sample pods (and the
objects between them and the workload, such as Jobs) to components and gangs.`

const describeExample = `  # A live workload, by type and name
  muster describe jobset/trainer -n team-a
  muster describe jobset trainer -n team-a

  # Show every pod, not only the first 20 per component
  muster describe rayclusters/chat --pod-limit 0

  # Many components: at most 3 under each parent, unready or missing pods first
  muster describe jobset/trainer --component-limit 3

  # Offline: the tree and gang plan of a manifest, from a file or stdin
  muster describe -f trainer.yaml
  helm template ./chart | muster describe -f -

  # Try a definition you are writing on a sample object and sample pods
  muster describe -f sample.yaml --definition my-def.yaml --pods sample-pods.yaml -o json`

// DescribeOptions are the options of "muster describe".
type DescribeOptions struct {
	env *Env

	Filename   string
	Definition string
	PodFiles   []string
	PodLimit   int
	// ComponentLimit caps the components shown under each parent in the
	// table (0 shows all).
	ComponentLimit int
	Output         string
	Namespace      string
	PodSelector    string

	typeArg, nameArg string

	genericiooptions.IOStreams
}

// NewCmdDescribe returns the describe command.
func NewCmdDescribe(env *Env) *cobra.Command {
	o := &DescribeOptions{env: env, PodLimit: 20, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "describe (TYPE/NAME | TYPE NAME | -f FILE | -f -) [--pod-limit N] [--component-limit N] [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Show a workload's roles, pods, GPUs, nodes and gangs",
		Long:                  describeLong,
		Example:               describeExample,
		ValidArgsFunction:     completeTypeAndName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Filename, "filename", "f", "", "Describe the workload(s) in this manifest offline (\"-\" for stdin)")
	f.StringVar(&o.Definition, "definition", "", "With -f: use this definition file instead of the catalog's")
	f.StringArrayVar(&o.PodFiles, "pods", nil, "With -f: sample pods (multi-document YAML; Jobs and other intermediate owners may be included) to attribute to components and gangs; repeatable")
	f.IntVar(&o.PodLimit, "pod-limit", o.PodLimit, "Pods shown per component, unhealthy first (0 = all)")
	f.IntVar(&o.ComponentLimit, "component-limit", 0, "Components shown under each parent in the tree, those with unready or missing pods first (0 = all); table output only")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete fills the options from the arguments.
func (o *DescribeOptions) Complete(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		parts := strings.SplitN(args[0], "/", 2)
		o.typeArg, o.nameArg = parts[0], parts[1]
	case len(args) == 1:
		o.typeArg = args[0]
	case len(args) == 2:
		o.typeArg, o.nameArg = args[0], args[1]
	case len(args) > 2:
		return usageErrorf("describe takes TYPE/NAME or TYPE NAME, got %d arguments", len(args))
	}
	o.Namespace = *o.env.ConfigFlags.Namespace
	return nil
}

// Validate checks the combination of arguments and flags.
func (o *DescribeOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	if o.PodLimit < 0 {
		return usageErrorf("--pod-limit must be 0 (all) or more, not %d", o.PodLimit)
	}
	if o.ComponentLimit < 0 {
		return usageErrorf("--component-limit must be 0 (all) or more, not %d", o.ComponentLimit)
	}
	if o.Filename != "" {
		if o.typeArg != "" {
			return usageErrorf("give either -f FILE or TYPE/NAME, not both")
		}
		return nil
	}
	if o.Definition != "" || len(o.PodFiles) > 0 {
		return usageErrorf("--definition and --pods work with -f FILE only")
	}
	if o.typeArg == "" {
		return usageErrorf("describe needs TYPE/NAME, TYPE NAME or -f FILE (see \"muster describe --help\")")
	}
	if o.nameArg == "" {
		return usageErrorf("describe needs a name: %s/NAME or %s NAME", o.typeArg, o.typeArg)
	}
	return nil
}

// Run describes the workload.
func (o *DescribeOptions) Run(ctx context.Context) error {
	return reportNoDefinition(o.Out, o.Output, o.typeArg, o.run(ctx))
}

func (o *DescribeOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	descs, err := o.describe(ctx)
	if err != nil {
		return err
	}
	return renderDescriptions(o.Out, newPainter(o.env, o.Out), descs, o.Output, o.ComponentLimit)
}

// describe builds the view of the workload named, or of each workload of
// -f; writing it out is renderDescriptions' part alone.
func (o *DescribeOptions) describe(ctx context.Context) ([]*Description, error) {
	if o.Filename != "" {
		return o.runOffline(ctx)
	}
	d, err := o.runLive(ctx)
	if err != nil {
		return nil, err
	}
	return []*Description{d}, nil
}

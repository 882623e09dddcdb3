// Package cli implements the muster command: describe, get, validate,
// set-scheduler, definitions, version and shell completion. Every command
// follows the kubectl shape (an Options struct with Complete, Validate and
// Run, and injected IOStreams) and returns errors instead of exiting, so
// tests run the commands in-process; Main turns the error into one
// "error: …" line and an exit code (errors.go). cmd/muster's main only
// hands the process to Main, so the binary and kubectl-muster are this
// package.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Main runs the muster command line args (without the program name) and
// returns the exit code. It never panics on user input and never prints a
// stack trace: a panic below is reported as an internal error.
func Main(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	// client-go logs discovery failures through klog; the CLI reports
	// errors itself, as one line, so keep klog quiet. Its own output
	// settings are not enough: klog copies errors to stderr regardless
	// (stderrthreshold), so every klog call goes to a discarding logger.
	klog.SetLogger(logr.Discard())
	return Run(ctx, NewEnv(streams), args)
}

// Run is Main on a prepared Env; tests use it with fake clusters.
func Run(ctx context.Context, env *Env, args []string) (code int) {
	if ctx == nil {
		ctx = context.Background()
	}
	streams := env.Streams
	env.Streams.Out = quietAfter{ctx: ctx, w: streams.Out}
	env.Streams.ErrOut = quietAfter{ctx: ctx, w: streams.ErrOut}
	cmd := NewRootCommand(env)
	cmd.SetArgs(args)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(streams.ErrOut, "error: internal error: %v (please report it)\n", r)
			if os.Getenv("MUSTER_DEBUG") != "" {
				// Where it happened, for the report.
				streams.ErrOut.Write(debug.Stack())
			}
			code = ExitInvalid
		}
	}()
	if env.ConfigFlags != nil && env.ConfigFlags.WrapConfigFn == nil {
		env.ConfigFlags.WrapConfigFn = func(cfg *rest.Config) *rest.Config { return cancelRequestsOn(ctx, cfg) }
	}
	err := cmd.ExecuteContext(ctx)
	if ctx.Err() != nil {
		// Interrupted: whatever failed on the way out failed because of
		// it; one line says so.
		fmt.Fprintln(streams.ErrOut, "error: interrupted")
		return ExitInterrupted
	}
	if err != nil {
		fmt.Fprintf(streams.ErrOut, "error: %s\n", oneLine(err.Error()))
	}
	return ExitCode(err)
}

// Env is what every command shares: streams, cluster flags, output
// preferences, and the way to reach a cluster. Tests replace NewCluster and
// Now to run commands against fake clients and a fixed clock.
type Env struct {
	Streams     genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags

	// Color is auto, always or never (--color).
	Color string
	// GPUResources are the resource names counted as GPUs (--gpu-resource).
	GPUResources []string

	// NewCluster builds the cluster clients; nil means from ConfigFlags.
	NewCluster func() (*Cluster, error)
	// Now is the clock used for ages.
	Now func() time.Time
	// Getenv reads the environment (NO_COLOR).
	Getenv func(string) string

	cluster    *Cluster
	clusterErr error
}

// NewEnv returns an Env reading kubeconfig through the standard
// cli-runtime flags.
func NewEnv(streams genericiooptions.IOStreams) *Env {
	return &Env{
		Streams:     streams,
		ConfigFlags: genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50),
		Color:       "auto",
		Now:         time.Now,
		Getenv:      os.Getenv,
	}
}

// Cluster returns the cluster clients, built once.
func (e *Env) Cluster() (*Cluster, error) {
	if e.cluster == nil && e.clusterErr == nil {
		if e.NewCluster != nil {
			e.cluster, e.clusterErr = e.NewCluster()
		} else {
			e.cluster, e.clusterErr = newClusterFromFlags(e.ConfigFlags)
		}
	}
	return e.cluster, e.clusterErr
}

const rootLong = `muster shows any Kubernetes workload as its roles, GPUs, nodes and gangs.

A workload definition (a Karta, run.ai/v1alpha1) tells muster where a workload
type keeps its roles, pod templates, replica counts and status, and how its pods
form gangs. muster embeds definitions for common AI frameworks and reads the
cluster's own Karta objects too (the cluster's definition wins for a kind).

It is also a kubectl plugin: installed as kubectl-muster, run "kubectl muster …".`

const rootExample = `  # See a JobSet as its roles, pods, GPUs, nodes and gang
  muster describe jobset/trainer -n team-a

  # The same from a manifest, offline, with the gangs the pod-grouper would create
  muster describe -f trainer.yaml

  # Every top-level workload of every defined kind in all namespaces
  muster get -A

  # Check a definition you are writing against the CRD it targets
  muster validate my-definition.yaml --crd crd.yaml`

// NewRootCommand builds the muster command tree on env.
func NewRootCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "muster",
		Short:         "See AI workloads as roles, GPUs, nodes and gangs",
		Long:          rootLong + "\n\n" + exitCodesHelp,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Suggest "describe" for "descibe".
		SuggestionsMinimumDistance: 2,
		// Args on the root turns an unknown command into a usage error
		// (exit 2) with cobra's suggestions, instead of a plain error.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return usageErrorf("%s (see %q)", msg, "muster --help")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch env.Color {
			case "auto", "always", "never":
			default:
				return usageErrorf("--color must be auto, always or never, not %q", env.Color)
			}
			for _, r := range env.GPUResources {
				if r == "" || strings.ContainsAny(r, " \t,") {
					return usageErrorf("--gpu-resource %q is not a resource name", r)
				}
			}
			return nil
		},
	}
	cmd.SetIn(env.Streams.In)
	cmd.SetOut(env.Streams.Out)
	cmd.SetErr(env.Streams.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v (see %q)", err, c.CommandPath()+" --help")
	})

	flags := cmd.PersistentFlags()
	env.ConfigFlags.AddFlags(flags)
	flags.StringVar(&env.Color, "color", env.Color, "Colorize output: auto (only on a terminal, and not when NO_COLOR is set), always or never")
	flags.StringSliceVar(&env.GPUResources, "gpu-resource", nil, "Resource names counted as GPUs, and DRA DeviceClasses whose devices pods claim through ResourceClaimTemplates count as GPUs (default nvidia.com/gpu,amd.com/gpu,gpu.nvidia.com,gpu.amd.com); repeat or comma-separate")

	cmd.AddCommand(
		NewCmdDescribe(env),
		NewCmdFit(env),
		NewCmdDashboard(env),
		NewCmdGet(env),
		NewCmdValidate(env),
		NewCmdSetScheduler(env),
		NewCmdDefinitions(env),
		NewCmdVersion(env),
	)
	registerFlagCompletions(cmd, env)
	return cmd
}

// errWriter is where warnings go: one "warning: …" line each.
func (e *Env) warnf(format string, args ...any) {
	fmt.Fprintf(e.Streams.ErrOut, "warning: %s\n", oneLine(fmt.Sprintf(format, args...)))
}

// maxInputBytes caps what -f, --pods, --definition and --crd read: the
// largest object etcd keeps is 1.5 MiB, and a file of manifests ten times
// that is still far from what a mistake (a log, a binary) would feed in.
const maxInputBytes = 16 << 20

// readInput reads a named file, or standard input for "-", up to
// maxInputBytes.
func (e *Env) readInput(name string) ([]byte, error) {
	var r io.Reader
	what := name
	if name == "-" {
		if e.Streams.In == nil {
			return nil, usageErrorf("cannot read standard input")
		}
		r, what = e.Streams.In, "standard input"
	} else {
		f, err := os.Open(name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				return nil, usageErrorf("cannot read %s: %v", name, pe.Err)
			}
			return nil, usageErrorf("cannot read %s: %v", name, err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, usageErrorf("cannot read %s: %v", what, err)
	}
	if len(data) > maxInputBytes {
		return nil, usageErrorf("%s is larger than %d MiB; muster reads Kubernetes manifests, one workload and its pods at most", what, maxInputBytes>>20)
	}
	return data, nil
}

// options is a command's options in kubectl's Complete / Validate / Run
// shape.
type options interface {
	Complete(args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runOptions is the RunE of a command whose options have that shape.
func runOptions(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
)

const definitionsLong = `List the workload definitions muster knows: the embedded catalog and, when a
cluster is reachable, the cluster's Karta objects (a cluster definition wins over
the embedded one for the same root kind; the losing one shows ACTIVE=no).

GANG says how the definition groups pods into gangs: "workload" (one gang for the
whole workload), "per <keys>" (one gang per value of the grouping keys, such as one
per LeaderWorkerSet group) or "none".

With NAME and -o yaml (or json) the definition is printed in full.`

const definitionsExample = `  # Every definition, embedded and in the cluster
  muster definitions

  # Only the embedded catalog, without touching a cluster
  muster definitions --offline

  # One definition in full, to start your own from it
  muster definitions jobset -o yaml > my-jobset.yaml`

// DefinitionsOptions are the options of "muster definitions".
type DefinitionsOptions struct {
	env     *Env
	Name    string
	Output  string
	Offline bool
	genericiooptions.IOStreams
}

// NewCmdDefinitions returns the definitions command.
func NewCmdDefinitions(env *Env) *cobra.Command {
	o := &DefinitionsOptions{env: env, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "definitions [NAME] [--offline] [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Aliases:               []string{"definition", "defs", "def"},
		Short:                 "List workload definitions (embedded and cluster), or print one",
		Long:                  definitionsLong,
		Example:               definitionsExample,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			defs, err := env.loadDefinitions(cmd.Context(), env.clusterOrNil())
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			var out []string
			for _, e := range defs.reg.List() {
				if strings.HasPrefix(e.Name, toComplete) {
					out = append(out, e.Name)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("definitions takes at most one NAME, got %d", len(args))
			}
			if len(args) == 1 {
				o.Name = args[0]
			}
			if err := validateOutput(o.Output); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Offline, "offline", false, "List only the embedded catalog; do not contact a cluster")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// clusterOrNil returns the cluster when one is configured, nil otherwise
// (commands that work without a cluster use it).
func (e *Env) clusterOrNil() *Cluster {
	c, err := e.Cluster()
	if err != nil {
		return nil
	}
	return c
}

// Run lists or prints definitions.
func (o *DefinitionsOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var c *Cluster
	if !o.Offline {
		var err error
		c, err = o.env.Cluster()
		if err != nil {
			// Listing works offline: say so and go on with the catalog.
			o.env.warnf("%v; listing the embedded catalog only", err)
			c = nil
		}
	}
	defs, err := o.env.loadDefinitions(ctx, c)
	if err != nil {
		if ExitCode(err) != ExitUnreachable {
			return err
		}
		o.env.warnf("%v; listing the embedded catalog only", err)
		if defs, err = o.env.loadDefinitions(ctx, nil); err != nil {
			return err
		}
	}
	entries := defs.reg.List()
	if o.Name != "" {
		var found []catalog.Entry
		for _, e := range entries {
			if e.Name == o.Name {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name)
			}
			msg := fmt.Sprintf("no definition named %q", o.Name)
			if s := suggest(o.Name, names); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return notFoundErrorf("%s (see \"muster definitions\")", msg)
		}
		if o.Output == "yaml" || o.Output == "json" {
			// The cluster one first: it is the one in force.
			sort.SliceStable(found, func(i, j int) bool {
				return found[i].Origin == catalog.Origin("cluster") && found[j].Origin != catalog.Origin("cluster")
			})
			k := defs.karta(&found[0])
			if k == nil {
				return notFoundErrorf("definition %q cannot be shown", o.Name)
			}
			return printKarta(o.Out, o.Output, k)
		}
		entries = found
	}
	rows := definitionRows(defs, entries)
	if o.Output == "json" || o.Output == "yaml" {
		return printData(o.Out, o.Output, DefinitionList{Items: rows})
	}
	p := newPainter(o.env, o.Out)
	t := &table{}
	head := []string{"NAME", "ORIGIN", "ROOT KIND", "GANG", "ACTIVE"}
	if o.Output == "wide" {
		head = append(head, "SOURCE", "ERROR")
	}
	t.addPlain(head...)
	for _, r := range rows {
		active := "yes"
		switch {
		case r.LastGoodGeneration > 0:
			active = fmt.Sprintf("generation %d (last valid)", r.LastGoodGeneration)
		case r.ShadowedBy != "":
			active = "no (" + r.ShadowedBy + " wins)"
		case !r.Active:
			active = "no"
		}
		gang := r.Gang
		if o.Output != "wide" {
			gang = ellipsis(gang, maxGangColumn)
		}
		cells := []cell{plain(r.Name), plain(r.Origin), plain(r.RootKind), plain(gang), painted(active, p.status(active))}
		if o.Output == "wide" {
			cells = append(cells, plain(r.Source), painted(r.Error, p.bad(r.Error)))
		}
		t.add(cells...)
	}
	return t.write(o.Out)
}

func definitionRows(defs *definitions, entries []catalog.Entry) []DefinitionRow {
	rows := make([]DefinitionRow, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		r := DefinitionRow{
			Name:     e.Name,
			Origin:   string(e.Origin),
			Source:   e.Source,
			RootKind: gvkString(e.GroupKind, e.Version),
			Gang:     "none",
		}
		if k := defs.karta(e); k != nil {
			r.Gang = gangGranularity(k)
		}
		if e.Err != nil {
			r.Error = oneLine(e.Err.Error())
		}
		r.Generation, r.ShadowedBy = e.Generation, e.ShadowedBy
		if e.LastGood != nil {
			r.LastGoodGeneration = e.LastGood.Generation
		}
		if win, ok := defs.reg.LookupGVK(e.GroupKind.WithVersion(e.Version)); ok && win.Name == e.Name && win.Origin == e.Origin && win.Generation == e.Serving().Generation && e.Serving() != nil {
			r.Active = true
		}
		rows = append(rows, r)
	}
	return rows
}

// maxGangColumn keeps the table readable: a gang's grouping keys are jq
// expressions and may be long; -o wide and -o json show them whole.
const maxGangColumn = 48

// ellipsis cuts s to at most n runes, marking the cut.
func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// gangGranularity says in a word how a definition forms gangs.
func gangGranularity(k *kartav1alpha1.Karta) string {
	oi := k.Spec.OptimizationInstructions
	if oi == nil || oi.GangScheduling == nil {
		return "none"
	}
	gs := oi.GangScheduling
	if gs.PodGroup != nil {
		return "workload"
	}
	var parts []string
	for _, pg := range gs.PodGroups {
		var keys []string
		for _, m := range pg.Members {
			for _, kp := range m.GroupByKeyPaths {
				if !contains(keys, kp) {
					keys = append(keys, kp)
				}
			}
		}
		if len(keys) == 0 {
			parts = append(parts, "workload")
		} else {
			parts = append(parts, "per "+strings.Join(keys, " + "))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// printKarta prints a definition as a person would write it: apiVersion
// and kind set, no status, no server-set metadata.
func printKarta(w io.Writer, format string, k *kartav1alpha1.Karta) error {
	c := *k
	c.APIVersion, c.Kind = kartav1alpha1.APIVersion, kartav1alpha1.Kind
	data, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("encode definition: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("encode definition: %w", err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range []string{"creationTimestamp", "managedFields", "resourceVersion", "uid", "generation"} {
			delete(md, f)
		}
	}
	if format == "json" {
		return printData(w, "json", m)
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode definition: %w", err)
	}
	_, err = w.Write(out)
	return err
}

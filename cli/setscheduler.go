package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/definition"
)

// defaultSchedulerName is the scheduler the muster manifests install.
const defaultSchedulerName = "muster-scheduler"

const setSchedulerLong = `Write a scheduler name into every pod template of the workloads in a manifest,
offline, and print the manifest.

Each workload whose kind has a definition is changed through that definition:
the scheduler name (and any --label and --annotation) goes wherever the
definition says its pod templates are, however deep and however many (every
replicated job of a JobSet, the leader and worker templates of a
LeaderWorkerSet, the pod fields spread over a NIMService's spec). Fields the
definition does not know are kept. Documents of other kinds (Services,
ConfigMaps, …) are printed as they were, comments included.

Definitions are the embedded catalog's; --definition uses that definition for
its kind instead. The cluster is not read.

Nothing is printed when a workload cannot be written: its definition has no
writable path for a field (exit 1, naming the component and field), or no
document has a definition (exit 4, naming the kinds).`

const setSchedulerExample = `  # Schedule a JobSet with muster's scheduler
  muster set-scheduler -f trainer.yaml | kubectl apply -f -

  # Another scheduler, a label on every pod, from standard input
  cat serve.yaml | muster set-scheduler -f - --scheduler-name my-scheduler --label team=a

  # Try a definition you are writing
  muster set-scheduler -f sample.yaml --definition my-def.yaml`

// SetSchedulerOptions are the options of "muster set-scheduler".
type SetSchedulerOptions struct {
	env *Env

	Filename      string
	Definition    string
	SchedulerName string
	Labels        []string
	Annotations   []string
	Output        string

	patch definition.TemplatePatch

	genericiooptions.IOStreams
}

// NewCmdSetScheduler returns the set-scheduler command.
func NewCmdSetScheduler(env *Env) *cobra.Command {
	o := &SetSchedulerOptions{env: env, SchedulerName: defaultSchedulerName, Output: "yaml", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "set-scheduler -f FILE [--scheduler-name NAME] [--label K=V] [--annotation K=V] [--definition DEF.yaml] [-o yaml|json]",
		DisableFlagsInUseLine: true,
		Short:                 "Write a scheduler name into every pod template of a manifest's workloads",
		Long:                  setSchedulerLong,
		Example:               setSchedulerExample,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Filename, "filename", "f", "", "The manifest (multi-document YAML or JSON; \"-\" for stdin)")
	f.StringVar(&o.SchedulerName, "scheduler-name", o.SchedulerName, "Scheduler name written into every pod template")
	f.StringArrayVar(&o.Labels, "label", nil, "Label KEY=VALUE added to every pod template; repeatable")
	f.StringArrayVar(&o.Annotations, "annotation", nil, "Annotation KEY=VALUE added to every pod template; repeatable")
	f.StringVar(&o.Definition, "definition", "", "Use this definition file for its kind instead of the catalog's")
	f.StringVarP(&o.Output, "output", "o", o.Output, "Output format: yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Validate checks the flags and builds the patch.
func (o *SetSchedulerOptions) Validate() error {
	if o.Filename == "" {
		return usageErrorf("set-scheduler needs -f FILE (\"-f -\" for stdin)")
	}
	if o.Output != "yaml" && o.Output != "json" {
		return usageErrorf("-o must be yaml or json, not %q", o.Output)
	}
	// The API server rejects a pod whose schedulerName is not a DNS
	// subdomain; say so now rather than at kubectl apply.
	if errs := validation.IsDNS1123Subdomain(o.SchedulerName); len(errs) > 0 {
		return usageErrorf("--scheduler-name %q: %s", o.SchedulerName, strings.Join(errs, "; "))
	}
	o.patch = definition.TemplatePatch{SchedulerName: o.SchedulerName}
	var err error
	if o.patch.Labels, err = keyValues("--label", o.Labels, true); err != nil {
		return err
	}
	if o.patch.Annotations, err = keyValues("--annotation", o.Annotations, false); err != nil {
		return err
	}
	return nil
}

// keyValues parses KEY=VALUE flags; label values are checked as label
// values, annotation values may be anything.
func keyValues(flag string, kvs []string, labels bool) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageErrorf("%s %q: want KEY=VALUE", flag, kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, usageErrorf("%s %q: key %q: %s", flag, kv, k, strings.Join(errs, "; "))
		}
		if labels {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return nil, usageErrorf("%s %q: value %q: %s", flag, kv, v, strings.Join(errs, "; "))
			}
		}
		out[k] = v
	}
	return out, nil
}

// manifestDoc is one YAML document of the input: its text as read and the
// objects in it (a List holds several).
type manifestDoc struct {
	raw  []byte
	obj  *unstructured.Unstructured
	list bool
	// changed is set when a workload in it was written.
	changed bool
}

// Run writes the patch and prints the manifest.
func (o *SetSchedulerOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	data, err := o.env.readInput(o.Filename)
	if err != nil {
		return err
	}
	docs, err := readManifest(o.Filename, data)
	if err != nil {
		return err
	}
	var own *definition.Compiled
	var ownRef defRef
	if o.Definition != "" {
		d := &DescribeOptions{env: o.env}
		if own, ownRef, err = d.compileDefinitionFile(o.Definition); err != nil {
			return err
		}
	}
	defs, err := o.env.loadDefinitions(ctx, nil)
	if err != nil {
		return err
	}
	lookup := func(obj *unstructured.Unstructured) (*definition.Compiled, string, error) {
		gvk := obj.GroupVersionKind()
		if own != nil && own.RootGVK().GroupKind() == gvk.GroupKind() {
			return own, ownRef.Name, nil
		}
		ent, err := defs.forGVK(gvk)
		if err != nil {
			return nil, "", err
		}
		return ent.Compiled, ent.Name, nil
	}

	written := 0
	var kinds, untouched []string
	var firstErr error
	for i := range docs {
		doc := &docs[i]
		objs := []*unstructured.Unstructured{doc.obj}
		var items []any
		if doc.list {
			items, _, _ = unstructured.NestedSlice(doc.obj.Object, "items")
			objs = objs[:0]
			for _, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return usageErrorf("%s: document %d: a List item is not an object", o.Filename, i+1)
				}
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
		for j, obj := range objs {
			what := fmt.Sprintf("%s: document %d: %s %s", o.Filename, i+1, obj.GetKind(), obj.GetName())
			kinds = append(kinds, obj.GetKind())
			c, defName, err := lookup(obj)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				if hasPodTemplate(obj.Object) {
					untouched = append(untouched, obj.GetKind()+"/"+obj.GetName())
				}
				continue
			}
			out, err := c.ApplyTemplatePatch(ctx, obj, o.patch)
			if err != nil {
				if note := notWritableNote(c, err); note != "" {
					err = fmt.Errorf("%w; %s", err, note)
				}
				return withCode(ExitInvalid, fmt.Errorf("%s (definition %s): %w", what, defName, err))
			}
			written++
			doc.changed = true
			if doc.list {
				items[j] = out.Object
			} else {
				doc.obj = out
			}
		}
		if doc.list && doc.changed {
			if err := unstructured.SetNestedSlice(doc.obj.Object, items, "items"); err != nil {
				return fmt.Errorf("%s: document %d: %v", o.Filename, i+1, err)
			}
		}
	}
	if written == 0 {
		return withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", o.Filename, strings.Join(uniqueSorted(kinds), ", "), firstErr))
	}
	if len(untouched) > 0 {
		o.env.warnf("%s: left unchanged, no definition for their kind although they have pod templates: %s", o.Filename, strings.Join(untouched, ", "))
	}
	if o.Output == "json" {
		return printJSONManifest(o.Out, docs)
	}
	return printYAMLManifest(o.Out, docs)
}

// annotationSetSchedulerNote is a definition annotation that says what to
// do when its kind cannot carry a scheduler name to every pod: the API has
// no such field, or the operator drops it on some pods. Which kinds those
// are is framework knowledge, so it lives in the definition, not here.
const annotationSetSchedulerNote = "muster.io/set-scheduler-note"

// notWritableNote returns the definition's note for a write-back error,
// or "" when the error is of another kind or the definition has none.
func notWritableNote(c *definition.Compiled, err error) string {
	if !errors.Is(err, definition.ErrNotWritable) {
		return ""
	}
	k := c.Definition()
	if k == nil {
		return ""
	}
	return strings.Join(strings.Fields(k.Annotations[annotationSetSchedulerNote]), " ")
}

// readManifest splits a manifest into documents, keeping each document's
// text so that a document that is not changed is printed as it was.
func readManifest(name string, data []byte) ([]manifestDoc, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []manifestDoc
	for n := 1; ; n++ {
		raw, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, usageErrorf("%s: document %d: %v", name, n, err)
		}
		// One YAML document may still hold several JSON objects one after
		// the other.
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		var objs []*unstructured.Unstructured
		for {
			var m map[string]any
			err := dec.Decode(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, usageErrorf("%s: document %d: %v", name, n, err)
			}
			if m == nil {
				continue // empty, or comments only
			}
			obj := &unstructured.Unstructured{Object: m}
			if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
				return nil, usageErrorf("%s: document %d: an object needs apiVersion and kind", name, n)
			}
			objs = append(objs, obj)
		}
		for _, obj := range objs {
			d := manifestDoc{obj: obj, list: obj.IsList()}
			if len(objs) == 1 {
				d.raw = raw
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, usageErrorf("%s: no objects in the file", name)
	}
	return out, nil
}

func printYAMLManifest(w io.Writer, docs []manifestDoc) error {
	var b bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		if !d.changed && d.raw != nil && !looksLikeJSON(d.raw) {
			b.Write(bytes.TrimLeft(d.raw, "\n"))
			if !bytes.HasSuffix(d.raw, []byte("\n")) {
				b.WriteByte('\n')
			}
			continue
		}
		data, err := yaml.Marshal(d.obj.Object)
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		b.Write(data)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// printJSONManifest prints one object as itself and several as a v1 List,
// which kubectl apply takes as well.
func printJSONManifest(w io.Writer, docs []manifestDoc) error {
	var v any
	if len(docs) == 1 {
		v = docs[0].obj.Object
	} else {
		items := make([]any, len(docs))
		for i, d := range docs {
			items[i] = d.obj.Object
		}
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func looksLikeJSON(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		return t[0] == '{'
	}
	return false
}

// hasPodTemplate tells whether v holds a pod spec somewhere: an object
// with a list of containers. It only decides whether an object left alone
// is worth a warning.
func hasPodTemplate(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if c, ok := v["containers"].([]any); ok && len(c) > 0 {
			return true
		}
		for _, x := range v {
			if hasPodTemplate(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasPodTemplate(x) {
				return true
			}
		}
	}
	return false
}

func uniqueSorted(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

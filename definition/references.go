package definition

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq"
)

// AnnotationReferences on a Karta declares the objects other than the root
// that the definition reads (package documentation, "References"). It is
// an annotation, not a spec field, so that the same document still applies
// to a cluster with Workload Map's own Karta CRD, whose structural schema
// would prune a field it does not know, and to Workload Map's engine,
// which ignores it.
const AnnotationReferences = "muster.io/references"

// MaxReferences bounds the references of one definition: each is an
// informer in the pod-grouper and a GET per workload in the CLI.
const MaxReferences = 8

// Reference is one declared reference: $Name in the definition's root-side
// expressions is the object that NamePath (run on the root) names, of the kind that
// KindPath selects among Kinds (the only kind, without KindPath).
type Reference struct {
	Name     string          `json:"name"`
	NamePath string          `json:"namePath"`
	KindPath string          `json:"kindPath,omitempty"`
	Kinds    []ReferenceKind `json:"kinds"`
}

// ReferenceKind is a kind a reference may name. A namespaced object is
// looked up in the root's namespace only: a definition never makes muster
// read another namespace.
type ReferenceKind struct {
	Group   string `json:"group,omitempty"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Scope is "Namespaced" (the default) or "Cluster".
	Scope string `json:"scope,omitempty"`
}

// Scopes of a ReferenceKind.
const (
	ScopeNamespaced = "Namespaced"
	ScopeCluster    = "Cluster"
)

// GVK is the kind as a schema.GroupVersionKind.
func (k ReferenceKind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// Namespaced reports whether objects of the kind live in a namespace.
func (k ReferenceKind) Namespaced() bool { return k.Scope != ScopeCluster }

// Target is the object a reference names on one root object.
type Target struct {
	// Reference is the reference's name (the variable without $).
	Reference string
	Kind      ReferenceKind
	// Namespace is the root's for a namespaced kind, "" otherwise.
	Namespace string
	Name      string
}

func (t Target) String() string {
	if t.Namespace == "" {
		return t.Kind.Kind + " " + t.Name
	}
	return t.Kind.Kind + " " + t.Namespace + "/" + t.Name
}

// refDef is one compiled reference.
type refDef struct {
	Reference
	name, kind *expr
}

var referencesPath = field.NewPath("metadata", "annotations").Key(AnnotationReferences)

// refNameRE is a jq variable name; names starting with "__" are gojq's and
// muster's own.
var refNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// References returns the references a definition declares, decoded
// strictly from its muster.io/references annotation (none without it).
// The errors name the field; Compile checks the rest (names, kinds, paths).
func References(k *kartav1alpha1.Karta) ([]Reference, field.ErrorList) {
	if k == nil {
		return nil, nil
	}
	src, ok := k.Annotations[AnnotationReferences]
	if !ok {
		return nil, nil
	}
	var refs []Reference
	if err := yaml.UnmarshalStrict([]byte(src), &refs); err != nil {
		return nil, field.ErrorList{field.Invalid(referencesPath, shorten(src, maxValueInMessage),
			"want a YAML or JSON list of {name, namePath, kindPath, kinds: [{group, version, kind, scope}]}: "+err.Error())}
	}
	if len(refs) > MaxReferences {
		return nil, field.ErrorList{field.TooMany(referencesPath, len(refs), MaxReferences)}
	}
	return refs, nil
}

// references decodes, checks and compiles the declared references. It runs
// before the components, whose root-side expressions then read $name
// (jq.Vars).
func (b *builder) references() {
	refs, errs := References(b.c.karta)
	if b.add(errs...); len(errs) > 0 {
		return
	}
	names := map[string]bool{}
	for i, r := range refs {
		fp := referencesPath.Index(i)
		switch {
		case !refNameRE.MatchString(r.Name):
			b.add(field.Invalid(fp.Child("name"), r.Name, "a reference name is a jq variable name without $: a letter, then letters, digits and _"))
		case r.Name == "ENV":
			b.add(field.Invalid(fp.Child("name"), r.Name, "$ENV is jq's environment, which a definition may not read"))
		case names[r.Name]:
			b.add(field.Duplicate(fp.Child("name"), r.Name))
		}
		names[r.Name] = true
		d := &refDef{Reference: r}
		// Both paths run on the root alone: a reference never reads
		// another.
		d.name = b.compileExpr(fp.Child("namePath"), r.NamePath, true)
		if r.KindPath != "" {
			d.kind = b.compileExpr(fp.Child("kindPath"), r.KindPath, true)
		}
		b.referenceKinds(fp, &r)
		b.c.refs = append(b.c.refs, d)
	}
	for _, d := range b.c.refs {
		b.refVars = append(b.refVars, d.Name)
	}
}

func (b *builder) referenceKinds(fp *field.Path, r *Reference) {
	kp := fp.Child("kinds")
	switch {
	case len(r.Kinds) == 0:
		b.add(field.Required(kp, "a reference names at least one kind"))
	case len(r.Kinds) > MaxListItems:
		b.add(field.TooMany(kp, len(r.Kinds), MaxListItems))
		return
	case len(r.Kinds) > 1 && r.KindPath == "":
		b.add(field.Required(fp.Child("kindPath"), "with several kinds, kindPath must say which one the root names"))
	}
	seen := map[string]bool{}
	for j, k := range r.Kinds {
		p := kp.Index(j)
		if k.Kind == "" {
			b.add(field.Required(p.Child("kind"), ""))
		}
		if k.Version == "" {
			b.add(field.Required(p.Child("version"), ""))
		}
		if k.Scope != "" && k.Scope != ScopeNamespaced && k.Scope != ScopeCluster {
			b.add(field.NotSupported(p.Child("scope"), k.Scope, []string{ScopeNamespaced, ScopeCluster}))
		}
		// kindPath yields a kind name, so a name may appear once.
		if seen[k.Kind] {
			b.add(field.Duplicate(p.Child("kind"), k.Kind))
		}
		seen[k.Kind] = true
	}
}

// HasReferences reports whether the definition declares references.
func (c *Compiled) HasReferences() bool { return len(c.refs) > 0 }

// References returns the declared references, in declaration order.
func (c *Compiled) References() []Reference {
	out := make([]Reference, len(c.refs))
	for i, d := range c.refs {
		out[i] = d.Reference
		out[i].Kinds = slices.Clone(d.Kinds)
	}
	return out
}

// Targets returns the objects root names through the declared references.
// A reference whose namePath yields null, "" or nothing names no object
// (its variable is null); a kindPath naming a kind the reference does not
// list, or a path yielding anything but one string, is an *EvalError.
func (c *Compiled) Targets(ctx context.Context, root *unstructured.Unstructured) ([]Target, error) {
	if len(c.refs) == 0 {
		return nil, nil
	}
	in := jq.Value(root.Object)
	var out []Target
	for _, d := range c.refs {
		name, err := c.refString(ctx, d.name, in)
		if err != nil || name == "" {
			if err != nil {
				return nil, err
			}
			continue
		}
		k := d.Kinds[0]
		if d.kind != nil {
			kn, err := c.refString(ctx, d.kind, in)
			if err != nil {
				return nil, err
			}
			i := slices.IndexFunc(d.Kinds, func(k ReferenceKind) bool { return k.Kind == kn })
			if i < 0 {
				allowed := make([]string, len(d.Kinds))
				for j, k := range d.Kinds {
					allowed[j] = k.Kind
				}
				return nil, c.evalErr(d.kind, fmt.Errorf("names kind %q; reference %q allows %s", kn, d.Name, strings.Join(allowed, ", ")))
			}
			k = d.Kinds[i]
		}
		t := Target{Reference: d.Name, Kind: k, Name: name}
		if k.Namespaced() {
			t.Namespace = root.GetNamespace()
		}
		out = append(out, t)
	}
	return out, nil
}

// refString is the one string e yields on in; "" for null or nothing.
func (c *Compiled) refString(ctx context.Context, e *expr, in any) (string, error) {
	vals, err := c.eval(ctx, e, in)
	if err != nil {
		return "", err
	}
	switch {
	case len(vals) == 0 || len(vals) == 1 && vals[0] == nil:
		return "", nil
	case len(vals) > 1:
		return "", c.evalErr(e, fmt.Errorf("yields %d values, want one name", len(vals)))
	}
	s, ok := vals[0].(string)
	if !ok {
		return "", c.evalErr(e, fmt.Errorf("yields a %s, want a string", jq.TypeName(vals[0])))
	}
	return s, nil
}

// Bindings are the objects bound to a definition's references for the
// evaluations under one context (WithReferences).
type Bindings struct {
	// Objects by reference name. A reference with no entry, or a nil one,
	// is null: the root names no object, or none exists and the caller
	// chooses to assume so (the CLI offline).
	Objects map[string]*unstructured.Unstructured
	// Unresolved by reference name, with why: the root names an object the
	// caller could not read (missing, not yet synced, kind not served). The
	// variable is null, and an evaluation that reads it fails with an
	// *UnresolvedError whatever it yields, even inside // or try: a
	// result computed without the object could be a smaller gang than the
	// operator creates. An evaluation that does not read it is unaffected.
	Unresolved map[string]string
}

// UnresolvedError is an evaluation that read an unresolved reference.
type UnresolvedError struct {
	// Reference is the reference's name; Why what the caller said.
	Reference, Why string
	// Field and Expression are the expression that read it.
	Field, Expression string
}

func (e *UnresolvedError) Error() string {
	return fmt.Sprintf("%s %q reads $%s, which is not resolved: %s", e.Field, e.Expression, e.Reference, e.Why)
}

// boundRefs are the Bindings of one context, as the sandbox's variables,
// and their identity for the plan cache.
type boundRefs struct {
	vars jq.Vars
	// key names every binding (object UID and resourceVersion, or
	// unresolved and why); "" with nothing bound.
	key string
	// uncacheable: an object without UID or resourceVersion (a file).
	uncacheable bool
}

type refsCtxKey struct{}

// WithReferences returns a context under which the expressions of a
// definition with references see b's objects as $name (Extract, Status,
// GangForPod, GangPlans, ApplyTemplatePatch). Without it every reference
// is null. The objects are read, never changed, and must not be changed
// while the context is in use.
func WithReferences(ctx context.Context, b Bindings) context.Context {
	br := &boundRefs{vars: jq.Vars{Values: make(map[string]any, len(b.Objects)), Unresolved: b.Unresolved}}
	var key strings.Builder
	for _, n := range slices.Sorted(maps.Keys(b.Objects)) {
		o := b.Objects[n]
		if o == nil {
			continue
		}
		br.vars.Values[n] = jq.Value(o.Object)
		uid, rv := string(o.GetUID()), o.GetResourceVersion()
		if uid == "" || rv == "" {
			br.uncacheable = true
		}
		fmt.Fprintf(&key, "%s=%s/%s;", n, uid, rv)
	}
	for _, n := range slices.Sorted(maps.Keys(b.Unresolved)) {
		fmt.Fprintf(&key, "%s?%s;", n, b.Unresolved[n])
	}
	br.key = key.String()
	return context.WithValue(ctx, refsCtxKey{}, br)
}

// boundOf returns the bindings of ctx, nil without.
func boundOf(ctx context.Context) *boundRefs {
	b, _ := ctx.Value(refsCtxKey{}).(*boundRefs)
	return b
}

// refsKey is the binding's part of the plan cache key; ok is false when
// the plan must not be cached.
func (c *Compiled) refsKey(ctx context.Context) (key string, ok bool) {
	if len(c.refs) == 0 {
		return "", true
	}
	b := boundOf(ctx)
	if b == nil {
		return "", true
	}
	return b.key, !b.uncacheable
}

// Resolve finds each target among objs (a file's documents, say) by kind,
// namespace and name. It returns the objects found, by reference name, for
// WithReferences, and the targets not found.
func Resolve(targets []Target, objs []*unstructured.Unstructured) (map[string]*unstructured.Unstructured, []Target) {
	found := map[string]*unstructured.Unstructured{}
	var missing []Target
	for _, t := range targets {
		i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GroupVersionKind().GroupKind() == t.Kind.GVK().GroupKind() &&
				o.GetName() == t.Name && (t.Namespace == "" || o.GetNamespace() == "" || o.GetNamespace() == t.Namespace)
		})
		if i < 0 {
			missing = append(missing, t)
			continue
		}
		found[t.Reference] = objs[i]
	}
	return found, missing
}

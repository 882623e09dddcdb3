// Package schemacheck finds the fields a jq path reads that cannot exist in
// an OpenAPI v3 schema, such as a CRD's structural schema. It serves
// "muster validate --crd" and any test that checks a definition's paths
// against the kind it targets.
//
// It walks the field chains of the parsed query (.a.b[], .a["b"], .a[0],
// pipes, alternatives, select, map, if, object and array construction,
// variables bound with "as", to_entries on maps) and follows them through
// the schema. It reports only what provably cannot
// exist: a field missing from an object that lists its properties and does
// not keep unknown fields, or a field read from an array or a scalar.
// Anything it cannot follow (user functions, reduce, variables as keys,
// free-form objects such as metadata) ends the check of that chain without
// a report, so it gives no false alarms on paths it does not understand.
// A missing field's message suggests the nearest property by the rule every
// "did you mean" of muster uses (internal/closest), or lists the properties.
//
// Built-in kinds have no CRD; FromGoType builds the schema of their Go type
// (a Deployment, or the Pod that pod-side paths run on).
//
// Use it as:
//
//	problems, err := schemacheck.Check(".spec.replicatedJobs[].replicas", crdVersionSchema)
//
// Check is safe for concurrent use.
package schemacheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/itchyny/gojq"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/muster-io/muster/internal/closest"
)

// Problem is a field chain that cannot exist in the schema.
type Problem struct {
	// Path is the chain up to and including the field that cannot exist,
	// for example ".spec.replicatedJob".
	Path string
	// Message says why, and suggests the nearest existing field.
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Check parses expr and returns the field chains of it that cannot exist
// in schema (the schema of the root object). An expression that does not
// parse is an error; a nil schema accepts everything.
func Check(expr string, schema *apiextensionsv1.JSONSchemaProps) ([]Problem, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	return CheckQuery(q, schema), nil
}

// CheckQuery is Check on a parsed query.
func CheckQuery(q *gojq.Query, schema *apiextensionsv1.JSONSchemaProps) []Problem {
	w := &walker{seen: map[string]bool{}, vars: map[string][]node{}}
	w.query(q, []node{{s: schema, root: true}})
	sort.Slice(w.problems, func(i, j int) bool { return w.problems[i].Path < w.problems[j].Path })
	return w.problems
}

// node is a place in the schema; s == nil means "anything may be here".
type node struct {
	s    *apiextensionsv1.JSONSchemaProps
	path string
	root bool
}

var unknown = []node{{}}

type walker struct {
	problems []Problem
	seen     map[string]bool
	// vars are the places bound to $names by "E as $name | body"; a
	// variable not bound (or bound by a destructuring pattern) is unknown.
	vars map[string][]node
}

func (w *walker) report(path, msg string) {
	if w.seen[path] {
		return
	}
	w.seen[path] = true
	w.problems = append(w.problems, Problem{Path: path, Message: msg})
}

func (w *walker) query(q *gojq.Query, in []node) []node {
	if q == nil {
		return in
	}
	if q.Term != nil {
		return w.term(q.Term, in)
	}
	switch q.Op {
	case gojq.OpPipe:
		if len(q.Patterns) > 0 {
			// "E as $x | B": B reads the same input as E, and $x is
			// where E leads.
			bound := w.query(q.Left, in)
			saved := map[string][]node{}
			for _, p := range q.Patterns {
				if p.Name == "" {
					continue
				}
				if old, ok := w.vars[p.Name]; ok {
					saved[p.Name] = old
				} else {
					saved[p.Name] = nil
				}
				if len(q.Patterns) == 1 {
					w.vars[p.Name] = bound
				} else {
					// ?// alternatives: which one binds is not known.
					w.vars[p.Name] = unknown
				}
			}
			out := w.query(q.Right, in)
			for name, old := range saved {
				if old == nil {
					delete(w.vars, name)
				} else {
					w.vars[name] = old
				}
			}
			return out
		}
		return w.query(q.Right, w.query(q.Left, in))
	case gojq.OpComma, gojq.OpAlt:
		return append(w.query(q.Left, in), w.query(q.Right, in)...)
	default:
		// Arithmetic, comparison, logic, (assignments are rejected by
		// the definition validator): both sides read the input.
		w.query(q.Left, in)
		w.query(q.Right, in)
		return unknown
	}
}

func (w *walker) term(t *gojq.Term, in []node) []node {
	var out []node
	switch t.Type {
	case gojq.TermTypeIdentity:
		out = in
	case gojq.TermTypeIndex:
		out = w.index(t.Index, in)
	case gojq.TermTypeQuery:
		out = w.query(t.Query, in)
	case gojq.TermTypeFunc:
		out = w.fn(t.Func, in)
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			if kv.KeyQuery != nil {
				w.query(kv.KeyQuery, in)
			}
			if kv.Val != nil {
				w.query(kv.Val, in)
			} else if kv.Key != "" && !strings.HasPrefix(kv.Key, "$") {
				// {a} is {a: .a}
				w.field(in, kv.Key)
			}
		}
		out = unknown
	case gojq.TermTypeArray:
		if t.Array.Query != nil {
			w.query(t.Array.Query, in)
		}
		out = unknown
	case gojq.TermTypeString:
		if t.Str != nil {
			for _, q := range t.Str.Queries {
				w.query(q, in)
			}
		}
		out = unknown
	case gojq.TermTypeIf:
		w.query(t.If.Cond, in)
		out = w.query(t.If.Then, in)
		for _, e := range t.If.Elif {
			w.query(e.Cond, in)
			out = append(out, w.query(e.Then, in)...)
		}
		if t.If.Else != nil {
			out = append(out, w.query(t.If.Else, in)...)
		} else {
			out = append(out, in...)
		}
	case gojq.TermTypeTry:
		out = w.query(t.Try.Body, in)
	case gojq.TermTypeUnary:
		w.term(t.Unary.Term, in)
		out = unknown
	default:
		// Literals, reduce, foreach, labels, formats: nothing to follow.
		out = unknown
	}
	for _, s := range t.SuffixList {
		switch {
		case s.Index != nil:
			out = w.index(s.Index, out)
		case s.Iter:
			out = iter(out)
		}
	}
	return out
}

// fn follows the builtins whose arguments read the input or its elements;
// any other function's arguments are checked against the input (jq
// evaluates arguments there) and its result is unknown.
func (w *walker) fn(f *gojq.Func, in []node) []node {
	if strings.HasPrefix(f.Name, "$") {
		if v, ok := w.vars[f.Name]; ok {
			return v
		}
		return unknown
	}
	switch f.Name {
	case "to_entries":
		return toEntries(in)
	case "select", "values", "nulls", "booleans", "numbers", "strings", "arrays", "objects", "iterables", "scalars":
		for _, a := range f.Args {
			w.query(a, in)
		}
		return in
	case "map", "map_values", "sort_by", "group_by", "unique_by", "min_by", "max_by", "any", "all":
		items := iter(in)
		for _, a := range f.Args {
			if len(f.Args) == 2 && a == f.Args[0] {
				// any(gen; cond): the generator reads the input.
				items = w.query(a, in)
				continue
			}
			w.query(a, items)
		}
		if f.Name == "map" || f.Name == "map_values" {
			return unknown
		}
		if strings.HasSuffix(f.Name, "_by") && f.Name != "group_by" {
			if f.Name == "sort_by" || f.Name == "unique_by" {
				return in
			}
			return items
		}
		return unknown
	case "first", "last", "limit", "until", "while":
		var out []node
		for _, a := range f.Args {
			out = w.query(a, in)
		}
		if len(f.Args) == 0 && (f.Name == "first" || f.Name == "last") {
			return iter(in)
		}
		if out == nil {
			return unknown
		}
		return out
	}
	for _, a := range f.Args {
		w.query(a, in)
	}
	return unknown
}

func (w *walker) index(ix *gojq.Index, in []node) []node {
	switch {
	case ix.Name != "":
		return w.field(in, ix.Name)
	case ix.Str != nil && len(ix.Str.Queries) == 0:
		return w.field(in, ix.Str.Str)
	case ix.IsSlice:
		return in
	case ix.Start != nil:
		if k := constKey(ix.Start); k != "" {
			return w.field(in, k)
		}
		// A number (or a computed index) on an array: its items.
		var out []node
		for _, n := range in {
			if n.s != nil && n.s.Type == "array" {
				out = append(out, items(n))
			} else {
				out = append(out, node{})
			}
		}
		return out
	}
	return unknown
}

// constKey returns the string of a constant string index (.["a"] written
// as .[ "a" ]), "" otherwise.
func constKey(q *gojq.Query) string {
	if q.Term != nil && q.Term.Type == gojq.TermTypeString && q.Term.Str != nil && len(q.Term.Str.Queries) == 0 && len(q.Term.SuffixList) == 0 {
		return q.Term.Str.Str
	}
	return ""
}

// Fields every Kubernetes object has whether its schema lists them or not.
var objectMetaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

func (w *walker) field(in []node, name string) []node {
	out := make([]node, 0, len(in))
	for _, n := range in {
		path := n.path + "." + name
		if strings.ContainsAny(name, ".[]\" ") || name == "" {
			path = n.path + fmt.Sprintf("[%q]", name)
		}
		s := n.s
		if s == nil {
			out = append(out, node{path: path})
			continue
		}
		if p, ok := s.Properties[name]; ok {
			p := p
			next := node{s: &p, path: path}
			if name == "metadata" && len(p.Properties) == 0 {
				next.s = nil
			}
			out = append(out, next)
			continue
		}
		if n.root && objectMetaFields[name] {
			out = append(out, node{path: path})
			continue
		}
		switch s.Type {
		case "array":
			w.report(path, fmt.Sprintf("%s is an array: use %s[] or %s[N] before .%s", orDot(n.path), orDot(n.path), orDot(n.path), name))
			out = append(out, node{path: path})
			continue
		case "string", "integer", "number", "boolean":
			w.report(path, fmt.Sprintf("%s is a %s and has no field %q", orDot(n.path), s.Type, name))
			out = append(out, node{path: path})
			continue
		}
		if s.AdditionalProperties != nil {
			if s.AdditionalProperties.Schema != nil {
				out = append(out, node{s: s.AdditionalProperties.Schema, path: path})
			} else {
				out = append(out, node{path: path})
			}
			continue
		}
		if (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields) || len(s.Properties) == 0 {
			out = append(out, node{path: path})
			continue
		}
		w.report(path, missingMessage(n.path, name, s.Properties))
		out = append(out, node{path: path})
	}
	return out
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func missingMessage(parent, name string, props map[string]apiextensionsv1.JSONSchemaProps) string {
	known := make([]string, 0, len(props))
	for k := range props {
		known = append(known, k)
	}
	sort.Strings(known)
	msg := fmt.Sprintf("field %q does not exist in %s", name, orDot(parent))
	if best := closest.Closest(name, known); best != "" {
		return msg + fmt.Sprintf("; did you mean %q?", best)
	}
	if len(known) > 12 {
		known = append(known[:12], "…")
	}
	return msg + " (it has: " + strings.Join(known, ", ") + ")"
}

func items(n node) node {
	path := n.path + "[]"
	if n.s == nil || n.s.Items == nil {
		return node{path: path}
	}
	if n.s.Items.Schema != nil {
		return node{s: n.s.Items.Schema, path: path}
	}
	if len(n.s.Items.JSONSchemas) > 0 {
		return node{s: &n.s.Items.JSONSchemas[0], path: path}
	}
	return node{path: path}
}

// toEntries is to_entries on a map: a list of {key, value} whose values
// have the map's value schema. On anything else the result is unknown.
func toEntries(in []node) []node {
	out := make([]node, 0, len(in))
	for _, n := range in {
		if n.s == nil || n.s.AdditionalProperties == nil || n.s.AdditionalProperties.Schema == nil {
			out = append(out, node{path: n.path + "|to_entries"})
			continue
		}
		entry := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"key":   {Type: "string"},
			"value": *n.s.AdditionalProperties.Schema,
		}}
		out = append(out, node{
			s:    &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &entry}},
			path: n.path + "|to_entries",
		})
	}
	return out
}

// iter is .[]: array items, or the values of a map-like object.
func iter(in []node) []node {
	out := make([]node, 0, len(in))
	for _, n := range in {
		switch {
		case n.s == nil:
			out = append(out, node{path: n.path + "[]"})
		case n.s.Type == "array":
			out = append(out, items(n))
		case n.s.AdditionalProperties != nil && n.s.AdditionalProperties.Schema != nil:
			out = append(out, node{s: n.s.AdditionalProperties.Schema, path: n.path + "[]"})
		default:
			out = append(out, node{path: n.path + "[]"})
		}
	}
	return out
}

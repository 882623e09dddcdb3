package catalog

import (
	"testing"

	"fmt"
	corev1 "k8s.io/api/core/v1"
	"reflect"
	"strings"

	"github.com/itchyny/gojq"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// snode is an OpenAPI schema node reduced to what a path check needs. It is
// built from a CRD schema or from a Go API type by reflection.
type snode struct {
	path  string
	props map[string]*snode // object with declared fields
	items *snode            // array
	addl  *snode            // map (additionalProperties)
	free  bool              // anything goes (preserve-unknown-fields, untyped object, leaf of unknown shape)
}

func fromCRD(s *apiextensionsv1.JSONSchemaProps, path string, depth int) *snode {
	n := &snode{path: path}
	if s == nil || depth > 60 {
		n.free = true
		return n
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		n.free = true
	}
	if s.XIntOrString || s.XEmbeddedResource && len(s.Properties) == 0 {
		n.free = true
	}
	if len(s.Properties) > 0 {
		n.props = map[string]*snode{}
		for k, v := range s.Properties {
			v := v
			n.props[k] = fromCRD(&v, path+"."+k, depth+1)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		n.items = fromCRD(s.Items.Schema, path+"[]", depth+1)
	}
	if s.AdditionalProperties != nil {
		if s.AdditionalProperties.Schema != nil {
			n.addl = fromCRD(s.AdditionalProperties.Schema, path+"{}", depth+1)
		} else {
			n.addl = &snode{path: path + "{}", free: true}
		}
	}
	if s.Type == "object" && n.props == nil && n.addl == nil {
		n.free = true // an untyped object (metadata in CRDs)
	}
	return n
}

// fromType describes a Go API type through its json tags.
func fromType(t reflect.Type, path string, depth int) *snode {
	n := &snode{path: path}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 30 {
		n.free = true
		return n
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" && t.Name() == "Time" ||
			strings.HasSuffix(t.PkgPath(), "api/resource") || strings.HasSuffix(t.PkgPath(), "util/intstr") {
			return n // a leaf with a custom JSON form
		}
		n.props = map[string]*snode{}
		addFields(n, t, path, depth)
	case reflect.Slice, reflect.Array:
		n.items = fromType(t.Elem(), path+"[]", depth+1)
	case reflect.Map:
		n.addl = fromType(t.Elem(), path+"{}", depth+1)
	case reflect.Interface:
		n.free = true
	}
	return n
}

func addFields(n *snode, t reflect.Type, path string, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name := strings.Split(tag, ",")[0]
		if strings.Contains(tag, "inline") || (f.Anonymous && name == "") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			addFields(n, ft, path, depth)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		n.props[name] = fromType(f.Type, path+"."+name, depth+1)
	}
}

// pathChecker walks a jq expression's AST and records every field it reads
// that the schema does not have. Computed parts (functions it does not
// model, arithmetic, string building) end the walk of that branch rather
// than guessing.
type pathChecker struct {
	missing []string
}

func (pc *pathChecker) field(n *snode, name string) *snode {
	if n == nil || n.free {
		return nil
	}
	if n.props != nil {
		if c, ok := n.props[name]; ok {
			return c
		}
		if n.addl == nil {
			pc.missing = append(pc.missing, n.path+"."+name)
			return nil
		}
	}
	if n.addl != nil {
		return n.addl
	}
	if n.items != nil {
		pc.missing = append(pc.missing, fmt.Sprintf("%s.%s (an array)", n.path, name))
	}
	return nil
}

func iter(n *snode) *snode {
	if n == nil || n.free {
		return nil
	}
	if n.items != nil {
		return n.items
	}
	return n.addl
}

type env map[string]*snode

func (pc *pathChecker) query(q *gojq.Query, ctx *snode, vars env) *snode {
	if q == nil {
		return nil
	}
	if q.Term != nil {
		return pc.term(q.Term, ctx, vars)
	}
	switch q.Op {
	case gojq.OpPipe:
		if len(q.Patterns) > 0 { // E as $x | body: body runs on the same input
			v := pc.query(q.Left, ctx, vars)
			inner := env{}
			for k, x := range vars {
				inner[k] = x
			}
			for _, p := range q.Patterns {
				if p.Name != "" {
					inner[p.Name] = v
				}
			}
			return pc.query(q.Right, ctx, inner)
		}
		return pc.query(q.Right, pc.query(q.Left, ctx, vars), vars)
	case gojq.OpAlt:
		l := pc.query(q.Left, ctx, vars)
		pc.query(q.Right, ctx, vars)
		return l
	default:
		pc.query(q.Left, ctx, vars)
		pc.query(q.Right, ctx, vars)
		return nil
	}
}

func (pc *pathChecker) term(t *gojq.Term, ctx *snode, vars env) *snode {
	var cur *snode
	switch t.Type {
	case gojq.TermTypeIdentity:
		cur = ctx
	case gojq.TermTypeIndex:
		cur = pc.index(t.Index, ctx, vars)
	case gojq.TermTypeQuery:
		cur = pc.query(t.Query, ctx, vars)
	case gojq.TermTypeFunc:
		cur = pc.fn(t.Func, ctx, vars)
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			if kv.KeyQuery != nil {
				pc.query(kv.KeyQuery, ctx, vars)
			}
			if kv.Val != nil {
				pc.query(kv.Val, ctx, vars)
			} else if kv.Key != "" && !strings.HasPrefix(kv.Key, "$") {
				pc.field(ctx, kv.Key) // {a} is {a: .a}
			}
		}
	case gojq.TermTypeArray:
		if t.Array.Query != nil {
			pc.query(t.Array.Query, ctx, vars)
		}
	case gojq.TermTypeUnary:
		pc.term(t.Unary.Term, ctx, vars)
	case gojq.TermTypeIf:
		pc.query(t.If.Cond, ctx, vars)
		pc.query(t.If.Then, ctx, vars)
		for _, e := range t.If.Elif {
			pc.query(e.Cond, ctx, vars)
			pc.query(e.Then, ctx, vars)
		}
		pc.query(t.If.Else, ctx, vars)
	case gojq.TermTypeTry:
		pc.query(t.Try.Body, ctx, vars)
	}
	for _, s := range t.SuffixList {
		switch {
		case s.Index != nil:
			cur = pc.index(s.Index, cur, vars)
		case s.Iter:
			cur = iter(cur)
		}
	}
	return cur
}

func (pc *pathChecker) index(ix *gojq.Index, ctx *snode, vars env) *snode {
	switch {
	case ix.Name != "":
		return pc.field(ctx, ix.Name)
	case ix.Str != nil && len(ix.Str.Queries) == 0:
		return pc.field(ctx, ix.Str.Str)
	case ix.IsSlice:
		pc.query(ix.Start, nil, vars)
		pc.query(ix.End, nil, vars)
		return ctx
	case ix.Start != nil:
		pc.query(ix.Start, nil, vars)
		if ctx != nil && !ctx.free && ctx.items != nil {
			return ctx.items
		}
		if ctx != nil && !ctx.free && ctx.addl != nil {
			return ctx.addl
		}
	}
	return nil
}

func (pc *pathChecker) fn(f *gojq.Func, ctx *snode, vars env) *snode {
	if strings.HasPrefix(f.Name, "$") {
		return vars[f.Name]
	}
	switch f.Name {
	case "select", "sort_by", "unique_by", "group_by", "min_by", "max_by":
		if len(f.Args) == 1 {
			if f.Name == "select" {
				pc.query(f.Args[0], ctx, vars)
				return ctx
			}
			pc.query(f.Args[0], iter(ctx), vars)
		}
		return ctx
	case "map":
		if len(f.Args) == 1 {
			pc.query(f.Args[0], iter(ctx), vars)
		}
		return nil
	case "to_entries":
		if ctx == nil || ctx.free || ctx.addl == nil {
			return nil
		}
		entry := &snode{path: ctx.path + "{}", props: map[string]*snode{
			"key":   {path: ctx.path + "{key}", free: true},
			"value": ctx.addl,
		}}
		return &snode{path: ctx.path, items: entry}
	case "first", "last":
		if len(f.Args) == 0 {
			return iter(ctx)
		}
	case "not", "length", "keys", "ascii_downcase", "ascii_upcase", "tostring", "tonumber", "type", "add", "min", "max", "from_entries", "empty", "null", "true", "false":
		return nil
	}
	for _, a := range f.Args {
		pc.query(a, ctx, vars)
	}
	return nil
}

// checkPath parses src and returns the fields it reads that root lacks.
func checkPath(src string, root *snode) ([]string, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err
	}
	pc := &pathChecker{}
	pc.query(q, root, env{})
	return pc.missing, nil
}

func TestCheckPath(t *testing.T) {
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	svc := obj(map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}, "labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}})
	root := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"spec": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"jobs":     {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: ptr(obj(map[string]apiextensionsv1.JSONSchemaProps{"name": str, "replicas": {Type: "integer"}}))}},
			"services": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &svc}},
			"free":     {Type: "object", XPreserveUnknownFields: ptr(true)},
		}),
	})
	crd := fromCRD(&root, "X", 0)
	pod := fromType(reflect.TypeFor[corev1.Pod](), "Pod", 0)
	tests := []struct {
		expr    string
		pod     bool
		missing []string
	}{
		{expr: ".spec.jobs[].name"},
		{expr: ".spec.jobs[].nmae", missing: []string{"X.spec.jobs[].nmae"}},
		{expr: ".spec.jobs[] | (.replicas // 1) * 2"},
		{expr: ".spec.jobs | to_entries[] | .value.replica", missing: []string{}}, // arrays: to_entries is not modelled
		{expr: ".spec.services | to_entries[] | .value.replicas"},
		{expr: ".spec.services | to_entries[] | .value.replica", missing: []string{"X.spec.services{}.replica"}},
		{expr: ".spec.services[].labels[\"a/b\"]"},
		{expr: ".spec as $s | $s.jobz", missing: []string{"X.spec.jobz"}},
		{expr: ".spec.free.anything.at.all"},
		{expr: "if .spec.jobs == null then .status.x else 1 end", missing: []string{"X.status"}},
		{expr: `.metadata.labels["ray.io/node-type"]`, pod: true},
		{expr: `.metadata.labelz`, pod: true, missing: []string{"Pod.metadata.labelz"}},
		{expr: `.spec.containers[].resources.limits["nvidia.com/gpu"]`, pod: true},
		{expr: `.metadata.labels | (.["a"] // .["b"])`, pod: true},
	}
	for _, tt := range tests {
		target := crd
		if tt.pod {
			target = pod
		}
		got, err := checkPath(tt.expr, target)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if strings.Join(got, ",") != strings.Join(tt.missing, ",") {
			t.Errorf("checkPath(%s) = %v, want %v", tt.expr, got, tt.missing)
		}
	}
}

func ptr[T any](v T) *T { return &v }

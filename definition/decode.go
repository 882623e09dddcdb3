package definition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/internal/closest"
	"github.com/muster-io/muster/internal/yamldoc"
)

// Decode reads one definition (YAML or JSON) strictly: unknown fields,
// values of the wrong type, a wrong apiVersion or kind are errors that name
// the field path (a *ValidationError). Broken YAML is an error naming the
// line. Decode does not validate the definition's rules; Compile does.
func Decode(data []byte) (*kartav1alpha1.Karta, error) {
	if err := checkDefinitionSize(len(data)); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decode definition: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	return decodeJSON(j)
}

// DecodeAll reads every document of a multi-document YAML stream; empty
// documents are skipped. An error names the document (1-based).
func DecodeAll(data []byte) ([]*kartav1alpha1.Karta, error) {
	docs, err := yamldoc.Split(data, true)
	if err != nil {
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	out := make([]*kartav1alpha1.Karta, 0, len(docs))
	for _, d := range docs {
		k, err := decodeJSON(d.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", d.N, err)
		}
		out = append(out, k)
	}
	return out, nil
}

var kartaType = reflect.TypeFor[kartav1alpha1.Karta]()

// checkTypeMeta accepts the Karta type and the format's earlier name
// (ResourceInterface, same fields); each kind goes with its own apiVersion.
func checkTypeMeta(apiVersion, kind any) field.ErrorList {
	wantKind := kartav1alpha1.Kind
	var errs field.ErrorList
	switch av := apiVersion.(type) {
	case nil:
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+kartav1alpha1.APIVersion))
	case string:
		switch av {
		case kartav1alpha1.APIVersion:
		case kartav1alpha1.LegacyAPIVersion:
			wantKind = kartav1alpha1.LegacyKind
		default:
			errs = append(errs, field.Invalid(field.NewPath("apiVersion"), av, "must be "+kartav1alpha1.APIVersion+
				" (or the deprecated "+kartav1alpha1.LegacyAPIVersion+" with kind "+kartav1alpha1.LegacyKind+")"))
		}
	}
	switch kd := kind.(type) {
	case nil:
		errs = append(errs, field.Required(field.NewPath("kind"), "must be "+wantKind))
	case string:
		if kd != wantKind {
			detail := "must be " + wantKind
			if av, _ := apiVersion.(string); av == kartav1alpha1.LegacyAPIVersion {
				detail += " with apiVersion " + av
			} else if kd == kartav1alpha1.LegacyKind {
				detail += " (" + kartav1alpha1.LegacyKind + " goes with the deprecated apiVersion " + kartav1alpha1.LegacyAPIVersion + ")"
			}
			errs = append(errs, field.Invalid(field.NewPath("kind"), kd, detail))
		}
	}
	return errs
}

// IsLegacy reports whether k was written in the format's earlier name,
// optimization.nvidia.com/v1alpha1 ResourceInterface. Decode keeps the type
// as written so that callers can say so; everything else reads it as a
// Karta.
func IsLegacy(k *kartav1alpha1.Karta) bool {
	return k != nil && k.APIVersion == kartav1alpha1.LegacyAPIVersion && k.Kind == kartav1alpha1.LegacyKind
}

// LegacyNotice is the deprecation notice for a definition named name
// written as a ResourceInterface.
func LegacyNotice(name string) string {
	return fmt.Sprintf("definition %q is a %s %s, the deprecated name of the format: it is read as a %s %s (same fields); convert it with \"muster validate --convert FILE\"",
		name, kartav1alpha1.LegacyAPIVersion, kartav1alpha1.LegacyKind, kartav1alpha1.APIVersion, kartav1alpha1.Kind)
}

// checkDefinitionSize refuses a definition document over
// MaxDefinitionBytes before anything parses it.
func checkDefinitionSize(n int) error {
	if n > MaxDefinitionBytes {
		return fmt.Errorf("decode definition: the definition is %d bytes; at most %d KiB are allowed (the largest real definition is under 20 KiB)", n, MaxDefinitionBytes>>10)
	}
	return nil
}

func decodeJSON(j []byte) (*kartav1alpha1.Karta, error) {
	if err := checkDefinitionSize(len(j)); err != nil {
		return nil, err
	}
	var raw any
	if err := json.Unmarshal(j, &raw); err != nil {
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode definition: want an object with apiVersion %s and kind %s, got %s", kartav1alpha1.APIVersion, kartav1alpha1.Kind, jsonType(raw))
	}
	name := ""
	if md, ok := m["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	errs := checkTypeMeta(m["apiVersion"], m["kind"])
	errs = append(errs, checkShape(raw, kartaType, nil)...)
	if len(errs) > 0 {
		return nil, newValidationError(name, errs)
	}
	// The walk above has already named every unknown field and wrong type
	// with its path; the strict decoder is the safety net for what the walk
	// does not model.
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var k kartav1alpha1.Karta
	if err := dec.Decode(&k); err != nil {
		return nil, fmt.Errorf("decode definition %q: %w", name, err)
	}
	return &k, nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkShape compares a decoded JSON value with the Go type it will be read
// into and reports unknown fields and wrong types with their field paths,
// which encoding/json does not give (it names neither list indexes nor
// the first of several problems).
func checkShape(v any, t reflect.Type, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // the type reads itself (metav1.Time, JSON, …)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(v, t.Elem(), p)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{typeErr(p, v, "object")}
		}
		fields := jsonFields(t)
		var errs field.ErrorList
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, unknownField(p, k, fields))
				continue
			}
			errs = append(errs, checkShape(m[k], ft, child(p, k))...)
		}
		return errs
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return field.ErrorList{typeErr(p, v, "list")}
		}
		var errs field.ErrorList
		for i, x := range a {
			errs = append(errs, checkShape(x, t.Elem(), p.Index(i))...)
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{typeErr(p, v, "object")}
		}
		var errs field.ErrorList
		for k, x := range m {
			errs = append(errs, checkShape(x, t.Elem(), p.Key(k))...)
		}
		return errs
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{typeErr(p, v, "string")}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{typeErr(p, v, "boolean")}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			return field.ErrorList{typeErr(p, v, "integer")}
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(float64); !ok {
			return field.ErrorList{typeErr(p, v, "number")}
		}
	}
	return nil
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// jsonFields maps the JSON names of t's fields, inlined structs included,
// to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func unknownField(p *field.Path, name string, known map[string]reflect.Type) *field.Error {
	detail := "unknown field"
	if best := closest.Closest(name, slices.Collect(maps.Keys(known))); best != "" {
		detail += fmt.Sprintf("; did you mean %q?", best)
	}
	return field.Forbidden(child(p, name), detail)
}

func typeErr(p *field.Path, v any, want string) *field.Error {
	return field.TypeInvalid(p, shortValue(v), fmt.Sprintf("must be a %s, not a %s", want, jsonType(v)))
}

// shortValue keeps messages readable when the wrong value is a big object.
func shortValue(v any) any {
	switch v.(type) {
	case map[string]any:
		return "{…}"
	case []any:
		return "[…]"
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

package schemacheck

import (
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FromGoType returns the schema of a Kubernetes API Go type (appsv1.Deployment,
// corev1.Pod, …) as its JSON form has it: structs through their json tags
// (inline and embedded structs flattened), slices as arrays, maps as objects
// with additionalProperties. Types with a custom JSON form (metav1.Time,
// resource.Quantity, intstr.IntOrString, raw extensions) are leaves that
// Check does not look into, as is anything nested deeper than 30 levels.
func FromGoType(t reflect.Type) *apiextensionsv1.JSONSchemaProps {
	s := fromGoType(t, 0)
	return &s
}

func fromGoType(t reflect.Type, depth int) apiextensionsv1.JSONSchemaProps {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 30 {
		return apiextensionsv1.JSONSchemaProps{} // anything
	}
	switch t.Kind() {
	case reflect.Struct:
		if customJSON(t) {
			return apiextensionsv1.JSONSchemaProps{XIntOrString: true}
		}
		s := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		addGoFields(&s, t, depth)
		if len(s.Properties) == 0 {
			s.XPreserveUnknownFields = ptrTo(true)
		}
		return s
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return apiextensionsv1.JSONSchemaProps{Type: "string"} // []byte is base64
		}
		items := fromGoType(t.Elem(), depth+1)
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
	case reflect.Map:
		v := fromGoType(t.Elem(), depth+1)
		return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &v}}
	case reflect.String:
		return apiextensionsv1.JSONSchemaProps{Type: "string"}
	case reflect.Bool:
		return apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return apiextensionsv1.JSONSchemaProps{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return apiextensionsv1.JSONSchemaProps{Type: "number"}
	}
	return apiextensionsv1.JSONSchemaProps{} // interfaces: anything
}

// customJSON tells the API types that marshal themselves to a scalar or to
// free-form JSON.
func customJSON(t reflect.Type) bool {
	pkg := t.PkgPath()
	switch {
	case pkg == "k8s.io/apimachinery/pkg/apis/meta/v1" && (t.Name() == "Time" || t.Name() == "MicroTime" || t.Name() == "Duration"),
		strings.HasSuffix(pkg, "/api/resource"),
		strings.HasSuffix(pkg, "/util/intstr"),
		pkg == "k8s.io/apimachinery/pkg/runtime" && t.Name() == "RawExtension":
		return true
	}
	return false
}

func addGoFields(s *apiextensionsv1.JSONSchemaProps, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addGoFields(s, ft, depth)
			}
			continue
		}
		if name == "" {
			continue
		}
		s.Properties[name] = fromGoType(f.Type, depth+1)
	}
}

func ptrTo[T any](v T) *T { return &v }

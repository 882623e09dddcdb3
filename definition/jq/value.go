package jq

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"strconv"
)

// Value returns v in the value types Run accepts (map[string]any, []any, int,
// float64, *big.Int, string, bool, nil). Unstructured objects carry int64,
// which gojq rejects. Subtrees that need no change are shared, not copied:
// gojq never mutates its input, so sharing is safe and saves most of the
// copying (metadata, strings) on every call.
func Value(v any) any {
	out, _ := valueChanged(v)
	return out
}

func valueChanged(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, x := range v {
			if y, changed := valueChanged(x); changed {
				if out == nil {
					out = maps.Clone(v)
				}
				out[k] = y
			}
		}
		if out != nil {
			return out, true
		}
		return v, false
	case []any:
		var out []any
		for i, x := range v {
			if y, changed := valueChanged(x); changed {
				if out == nil {
					out = append([]any(nil), v...)
				}
				out[i] = y
			}
		}
		if out != nil {
			return out, true
		}
		return v, false
	case int64:
		if v >= math.MinInt && v <= math.MaxInt {
			return int(v), true
		}
		return new(big.Int).SetInt64(v), true
	case int32:
		return int(v), true
	case float32:
		return float64(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return valueChanged(i)
		}
		f, _ := v.Float64()
		return f, true
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = x
		}
		return m, true
	case []string:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = x
		}
		return a, true
	}
	return v, false
}

// Render is a jq value as text: strings as they are, everything else as
// JSON (so true is "true" and 2 is "2").
func Render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Truthy is jq truth: everything but null and false.
func Truthy(v any) bool { return v != nil && v != false }

// TypeName is the jq type name of v, for messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int, float64, *big.Int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// ValueInPlace is Value for a v the caller owns (a map it has just
// converted): maps and lists are converted in place instead of copied.
func ValueInPlace(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = ValueInPlace(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = ValueInPlace(x)
		}
		return v
	}
	return Value(v)
}

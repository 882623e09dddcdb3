package definition

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// Status maps obj's status to the shared vocabulary. Matchers of one status
// are ORed; within a matcher every part it sets must hold: byPhase compares
// case-insensitively, byConditions needs a condition of each type with the
// status (case-insensitively, so a boolean true matches "True") and reason
// when given, byExpression compares the expression's value rendered as text
// (strings as they are, other values as JSON) with expectedResult. Several
// statuses may match; none gives [Undefined]. A definition without
// statusDefinition always gives [Undefined].
func (c *Compiled) Status(ctx context.Context, obj *unstructured.Unstructured) (*Status, error) {
	st := &Status{}
	sd := c.status
	if sd == nil {
		st.Statuses = []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}
		return st, nil
	}
	root := toJQ(obj.Object)
	if sd.phase != nil {
		vals, err := c.eval(ctx, sd.phase, root)
		if err != nil {
			return nil, err
		}
		if len(vals) > 0 && vals[0] != nil {
			st.Phase = render(vals[0])
		}
	}
	if sd.conditions != nil {
		vals, err := c.eval(ctx, sd.conditions, root)
		if err != nil {
			return nil, err
		}
		// The path may yield the list or its items.
		if len(vals) == 1 {
			if list, ok := vals[0].([]any); ok {
				vals = list
			}
		}
		for _, x := range vals {
			m, ok := x.(map[string]any)
			if !ok {
				if x == nil {
					continue
				}
				return nil, &EvalError{Field: sd.conditions.field, Expression: sd.conditions.src, Err: fmt.Errorf("yields a %s, want condition objects", typeName(x))}
			}
			st.Conditions = append(st.Conditions, Condition{
				Type:    condField(m, sd.typeField),
				Status:  condField(m, sd.statusField),
				Reason:  condField(m, sd.reasonField),
				Message: condField(m, sd.messageField),
			})
		}
	}
	for si, matchers := range sd.mappings {
		for _, m := range matchers {
			ok, err := c.matches(ctx, &m, st, root)
			if err != nil {
				return nil, err
			}
			if ok {
				st.Statuses = append(st.Statuses, statusOrder[si])
				break
			}
		}
	}
	if len(st.Statuses) == 0 {
		st.Statuses = []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}
	}
	return st, nil
}

func condField(m map[string]any, name string) string {
	x, ok := m[name]
	if !ok || x == nil {
		return ""
	}
	return render(x)
}

func (c *Compiled) matches(ctx context.Context, m *matcherDef, st *Status, root any) (bool, error) {
	if m.byPhase != "" && !strings.EqualFold(m.byPhase, st.Phase) {
		return false, nil
	}
	for _, want := range m.byConditions {
		found := false
		for _, got := range st.Conditions {
			if got.Type != want.Type {
				continue
			}
			if want.Status != nil && !strings.EqualFold(*want.Status, got.Status) {
				continue
			}
			if want.Reason != nil && *want.Reason != got.Reason {
				continue
			}
			found = true
			break
		}
		if !found {
			return false, nil
		}
	}
	if m.expr != nil {
		vals, err := c.eval(ctx, m.expr, root)
		if err != nil {
			return false, err
		}
		for _, x := range vals {
			if render(x) == m.expected {
				return true, nil
			}
		}
		return false, nil
	}
	// A matcher that sets nothing cannot pass validation; one that sets
	// only phase or conditions holds here.
	return m.byPhase != "" || len(m.byConditions) > 0, nil
}

package definition

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq"
)

// Status maps obj's status to the shared vocabulary the way Workload Map
// does. The mappings are evaluated in Workload Map's order (Initializing,
// Running, Completed, Failed, Degraded, Suspended, Suspending, Resuming)
// and every status with a matching matcher is returned, in that order;
// Status.Primary picks the one the workload is in. None matching (no status at all included) gives
// [Undefined]. Matchers of one status are ORed; within a matcher every part
// it sets must hold: byPhase compares case-insensitively; each byConditions
// entry needs the condition of that type (the last one listed, when a type
// repeats) with the status (case-insensitively, so a boolean true matches
// "True") and reason, each compared only when the expected value is
// non-empty; byExpression takes the first value of (expression) | tostring
// and compares it with expectedResult. A definition without
// statusDefinition always gives [Undefined].
func (c *Compiled) Status(ctx context.Context, obj *unstructured.Unstructured) (*Status, error) {
	st := &Status{}
	sd := c.status
	if sd == nil {
		st.Statuses = []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}
		return st, nil
	}
	root := jq.Value(obj.Object)
	if sd.phase != nil {
		vals, err := c.eval(ctx, sd.phase, root)
		if err != nil {
			return nil, err
		}
		if len(vals) > 0 && vals[0] != nil {
			st.Phase = jq.Render(vals[0])
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
				return nil, &EvalError{Field: sd.conditions.field, Expression: sd.conditions.src, Err: fmt.Errorf("yields a %s, want condition objects", jq.TypeName(x))}
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
	return jq.Render(x)
}

func (c *Compiled) matches(ctx context.Context, m *matcherDef, st *Status, root any) (bool, error) {
	if m.byPhase != "" && !strings.EqualFold(m.byPhase, st.Phase) {
		return false, nil
	}
	for _, want := range m.byConditions {
		got, found := lastCondition(st.Conditions, want.Type)
		if !found {
			return false, nil
		}
		if want.Status != nil && *want.Status != "" && !strings.EqualFold(*want.Status, got.Status) {
			return false, nil
		}
		if want.Reason != nil && *want.Reason != "" && *want.Reason != got.Reason {
			return false, nil
		}
	}
	if m.expr != nil {
		vals, err := c.eval(ctx, m.expr, root)
		if err != nil {
			return false, err
		}
		// Workload Map reads only the first value; later ones, even a
		// matching one, do not count.
		return len(vals) > 0 && jq.Render(vals[0]) == m.expected, nil
	}
	// A matcher that sets nothing cannot pass validation; one that sets
	// only phase or conditions holds here.
	return m.byPhase != "" || len(m.byConditions) > 0, nil
}

// lastCondition is the condition of type t; Workload Map indexes conditions
// by type, so when a type repeats the last one listed is the one compared.
func lastCondition(conds []Condition, t string) (Condition, bool) {
	for i := len(conds) - 1; i >= 0; i-- {
		if conds[i].Type == t {
			return conds[i], true
		}
	}
	return Condition{}, false
}

package definition

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/muster-io/muster/definition/jq"
)

// Karta annotations that read a gang's topology from the workload, a muster
// extension beside references: the Karta's podGroup.topology levels are
// fixed strings, and a framework such as Grove names a topology domain per
// object ("rack"), which only another object (Grove's
// ClusterTopologyBinding) maps to a node label key. Each is a jq expression
// on the root, which may read references, yielding a node label key, or
// null (or nothing, or "") for no topology from the workload. The workload
// annotations muster.io/topology-required / -preferred still win: the path
// is not evaluated when they are set.
const (
	AnnotationTopologyRequiredPath  = "muster.io/topology-required-path"
	AnnotationTopologyPreferredPath = "muster.io/topology-preferred-path"
)

// topologyPaths compiles the topology path annotations.
func (b *builder) topologyPaths() {
	ann := b.c.karta.Annotations
	for _, a := range []struct {
		key string
		dst **expr
	}{{AnnotationTopologyRequiredPath, &b.c.topoRequired}, {AnnotationTopologyPreferredPath, &b.c.topoPreferred}} {
		if src, ok := ann[a.key]; ok {
			*a.dst = b.compileExpr(field.NewPath("metadata", "annotations").Key(a.key), src, true)
		}
	}
}

// topologyFromPaths sets the plan's topology keys the workload annotations
// left unset from the definition's topology paths, evaluated on root (in
// jq.Value form).
func (c *Compiled) topologyFromPaths(ctx context.Context, root any, p *rootPlan) error {
	for _, a := range []struct {
		e   *expr
		dst *string
	}{{c.topoRequired, &p.topologyRequired}, {c.topoPreferred, &p.topologyPreferred}} {
		if a.e == nil || *a.dst != "" {
			continue
		}
		vals, err := c.eval(ctx, a.e, root)
		if err != nil {
			return err
		}
		if len(vals) == 0 || len(vals) == 1 && (vals[0] == nil || vals[0] == "") {
			continue
		}
		if len(vals) > 1 {
			return c.evalErr(a.e, fmt.Errorf("yields %d values, want one node label key", len(vals)))
		}
		key, ok := vals[0].(string)
		if !ok {
			return c.evalErr(a.e, fmt.Errorf("yields a %s, want a node label key", jq.TypeName(vals[0])))
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			return c.evalErr(a.e, fmt.Errorf("yields %q, not a node label key: %s", key, msgs[0]))
		}
		*a.dst = key
	}
	return nil
}

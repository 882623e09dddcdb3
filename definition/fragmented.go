package definition

import (
	"context"
	"fmt"
	"maps"

	"github.com/muster-io/muster/definition/jq"
)

// fragmented builds pod templates from per-field paths. containersPath gives
// the container list and containerPath the main container, which goes first
// (replacing a listed container of the same name); without either there is
// one container named "main". resourcesPath and imagePath apply to the first
// container.
func (c *Compiled) fragmented(ctx context.Context, f *fragExprs, root any, n int) ([]map[string]any, error) {
	parts, err := c.fragParts(ctx, f, root, n)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, n)
	for j := range n {
		if out[j], err = c.fragTemplate(parts, j); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fragPart is one path of a fragmented definition and its value per
// instance (nil without the path).
type fragPart struct {
	e    *expr
	vals []any
}

// fragParts evaluates every path of f, by the name of the field it fills.
func (c *Compiled) fragParts(ctx context.Context, f *fragExprs, root any, n int) (map[string]*fragPart, error) {
	parts := map[string]*fragPart{}
	for _, p := range []struct {
		name string
		e    *expr
	}{
		{"containers", f.containers}, {"container", f.container}, {"resources", f.resources},
		{"image", f.image}, {"schedulerName", f.schedulerName}, {"priorityClassName", f.priorityClassName},
		{"resourceClaims", f.resourceClaims}, {"nodeAffinity", f.nodeAffinity}, {"podAffinity", f.podAffinity},
		{"labels", f.labels}, {"annotations", f.annotations},
	} {
		vals := make([]any, n)
		if p.e != nil {
			var err error
			if vals, err = c.perInstance(ctx, p.e, root, n); err != nil {
				return nil, err
			}
		}
		parts[p.name] = &fragPart{p.e, vals}
	}
	return parts, nil
}

// fragValue is the value of part name for instance j: nil when there is
// none, else one of jq type want.
func (c *Compiled) fragValue(parts map[string]*fragPart, name string, j int, want string) (any, error) {
	p := parts[name]
	x := p.vals[j]
	if x == nil {
		return nil, nil
	}
	if got := jq.TypeName(x); got != want {
		return nil, c.evalErr(p.e, fmt.Errorf("yields a %s, want a %s", got, want))
	}
	return x, nil
}

// fragTemplate builds the pod template of instance j from the parts.
func (c *Compiled) fragTemplate(parts map[string]*fragPart, j int) (map[string]any, error) {
	absent := true
	for _, p := range parts {
		absent = absent && p.vals[j] == nil
	}
	spec := map[string]any{}
	md := map[string]any{}
	containers, err := c.fragContainers(parts, j)
	if err != nil {
		return nil, err
	}
	spec["containers"] = containers
	for _, f := range []struct{ name, want string }{
		{"schedulerName", "string"}, {"priorityClassName", "string"}, {"resourceClaims", "array"},
	} {
		if x, err := c.fragValue(parts, f.name, j, f.want); err != nil {
			return nil, err
		} else if x != nil {
			spec[f.name] = x
		}
	}
	aff := map[string]any{}
	for _, name := range []string{"nodeAffinity", "podAffinity"} {
		if x, err := c.fragValue(parts, name, j, "object"); err != nil {
			return nil, err
		} else if x != nil {
			aff[name] = x
		}
	}
	if len(aff) > 0 {
		spec["affinity"] = aff
	}
	for _, name := range []string{"labels", "annotations"} {
		if x, err := c.fragValue(parts, name, j, "object"); err != nil {
			return nil, err
		} else if x != nil {
			md[name] = x
		}
	}
	t := map[string]any{"metadata": md, "spec": spec}
	if absent {
		// Marks a template built from defaults only; the caller
		// decides with the count whether the component is there.
		t["absent"] = true
	}
	return t, nil
}

// fragContainers is the container list of instance j: the listed
// containers with the main one first, and the resources and image on the
// first.
func (c *Compiled) fragContainers(parts map[string]*fragPart, j int) ([]any, error) {
	var containers []any
	if x, err := c.fragValue(parts, "containers", j, "array"); err != nil {
		return nil, err
	} else if x != nil {
		containers = append(containers, x.([]any)...)
	}
	if x, err := c.fragValue(parts, "container", j, "object"); err != nil {
		return nil, err
	} else if x != nil {
		main := x.(map[string]any)
		rest := containers[:0:0]
		for _, o := range containers {
			if om, ok := o.(map[string]any); ok && om["name"] != nil && om["name"] == main["name"] {
				continue
			}
			rest = append(rest, o)
		}
		containers = append([]any{main}, rest...)
	}
	if len(containers) == 0 {
		containers = []any{map[string]any{"name": "main"}}
	}
	first, ok := containers[0].(map[string]any)
	if !ok {
		return nil, c.evalErr(parts["containers"].e, fmt.Errorf("the first container is a %s, want an object", jq.TypeName(containers[0])))
	}
	first = maps.Clone(first) // never write into the object's own maps
	for _, f := range []struct{ name, want string }{{"resources", "object"}, {"image", "string"}} {
		if x, err := c.fragValue(parts, f.name, j, f.want); err != nil {
			return nil, err
		} else if x != nil {
			first[f.name] = x
		}
	}
	containers[0] = first
	return containers, nil
}

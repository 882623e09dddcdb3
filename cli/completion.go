package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shell completion: cobra's "completion" command gives the scripts; these
// functions complete types (every spelling of every defined kind) and
// names (listed live).

// registerFlagCompletions completes the flags whose values muster knows.
func registerFlagCompletions(root *cobra.Command, env *Env) {
	_ = root.RegisterFlagCompletionFunc("color", cobra.FixedCompletions([]string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := env.Cluster()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list, err := c.Kube.CoreV1().Namespaces().List(completionContext(cmd), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

func completionContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// completeTypeAndName completes TYPE, TYPE/NAME and TYPE NAME.
func completeTypeAndName(env *Env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		ctx := completionContext(cmd)
		switch {
		case len(args) == 0 && strings.Contains(toComplete, "/"):
			typ := toComplete[:strings.Index(toComplete, "/")]
			names := completeNames(ctx, env, typ, toComplete[len(typ)+1:])
			for i := range names {
				names[i] = typ + "/" + names[i]
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		case len(args) == 0:
			return completeTypes(ctx, env, toComplete), cobra.ShellCompDirectiveNoFileComp
		case len(args) == 1 && !strings.Contains(args[0], "/"):
			return completeNames(ctx, env, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTypes lists the spellings of the defined kinds starting with
// prefix: kind, kind.group and, from the cluster, plural and short names.
func completeTypes(ctx context.Context, env *Env, prefix string) []string {
	c := env.clusterOrNil()
	defs, err := env.loadDefinitions(ctx, c)
	if err != nil {
		defs, err = env.loadDefinitions(ctx, nil)
		if err != nil {
			return nil
		}
		c = nil
	}
	var cands []string
	if c != nil {
		cands = defs.typeCandidates(c.Mapper, shortNames(c))
	} else {
		cands = defs.typeCandidates(nil, nil)
	}
	var out []string
	for _, s := range cands {
		if strings.HasPrefix(s, strings.ToLower(prefix)) {
			out = append(out, s)
		}
	}
	return out
}

// completeNames lists the objects of typ in the namespace, live.
func completeNames(ctx context.Context, env *Env, typ, prefix string) []string {
	c, err := env.Cluster()
	if err != nil {
		return nil
	}
	rt, err := resolveType(c.Mapper, typ)
	if err != nil {
		return nil
	}
	ns := *env.ConfigFlags.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	ri := c.Dynamic.Resource(rt.Mapping.Resource)
	list, err := ri.Namespace(ns).List(ctx, metav1.ListOptions{})
	if rt.Mapping.Scope.Name() != "namespace" {
		list, err = ri.List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range list.Items {
		if strings.HasPrefix(o.GetName(), prefix) {
			out = append(out, o.GetName())
		}
	}
	return out
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/muster-io/muster/api"
	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
)

const getLong = `List top-level workloads of every kind muster has a definition for, with their
status, pods ready/desired, GPUs requested, gangs bound/planned and age.

TYPE is what kubectl accepts (kind, plural, short name or kind.group); TYPE NAME or
TYPE/NAME shows one workload. -l/--selector filters the workloads (not their pods) by
label, kubectl syntax. --phase keeps the workloads one of whose phases is the one
given; repeat it to keep any of several (the filter applies after the workloads are
read, so it does not make the listing cheaper). Workloads are listed in pages of
--chunk-size objects (0: in one request), as kubectl does.

"Top-level" means the object has no controller owner that muster also has a
definition for: a JobSet created by a TrainJob is listed as the TrainJob. Kinds
the cluster does not serve are skipped. Without TYPE every defined kind is listed
(the same as --all-types).`

const getExample = `  # Every workload in the current namespace
  muster get

  # Every JobSet in every namespace, with nodes and definitions
  muster get jobsets -A -o wide

  # One workload (both forms work)
  muster get jobset trainer
  muster get jobset/trainer

  # Failed or degraded JobSets of one team
  muster get jobsets --phase Failed --phase Degraded -l team=nlp

  # Every running workload, whatever its type
  muster get --all-types --phase Running

  # Machine-readable
  muster get --all-types -n team-a -o json`

// GetOptions are the options of "muster get".
type GetOptions struct {
	env *Env

	TypeArg       string
	NameArg       string
	AllTypes      bool
	AllNamespaces bool
	Output        string
	// Phases keeps the workloads with any of these phases (canonical
	// spelling); empty keeps all.
	Phases []string
	// Selector is a label selector on the workloads.
	Selector string
	// ChunkSize is the page size of list requests; 0 lists in one.
	ChunkSize int64

	genericiooptions.IOStreams
}

// NewCmdGet returns the get command.
func NewCmdGet(env *Env) *cobra.Command {
	o := &GetOptions{env: env, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "get [TYPE [NAME] | TYPE/NAME | --all-types] [-A] [-l SELECTOR] [--phase PHASE]... [--chunk-size N] [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "List top-level workloads with status, pods, GPUs and gangs",
		Long:                  getLong,
		Example:               getExample,
		// TYPE, TYPE NAME and TYPE/NAME complete as describe's do.
		ValidArgsFunction: completeTypeAndName(env),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.AllTypes, "all-types", false, "List every defined kind (the default without TYPE)")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List workloads in every namespace")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector on the workloads (not their pods), kubectl syntax: -l team=nlp,tier!=dev")
	cmd.Flags().StringArrayVar(&o.Phases, "phase", nil, "Keep workloads with this phase; repeat to keep any of several. One of "+strings.Join(phaseNames(), ", "))
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", 500, "List workloads in pages of this many objects, as kubectl does; 0 lists them in one request")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete takes TYPE, TYPE NAME or TYPE/NAME, kubectl's forms.
func (o *GetOptions) Complete(args []string) error {
	switch len(args) {
	case 0:
	case 1:
		t, n, qualified := strings.Cut(args[0], "/")
		if qualified && (t == "" || n == "") {
			return usageErrorf("%q: want TYPE/NAME", args[0])
		}
		o.TypeArg, o.NameArg = t, n
	case 2:
		if strings.Contains(args[0], "/") {
			return usageErrorf("NAME given twice: in %q and as %q", args[0], args[1])
		}
		o.TypeArg, o.NameArg = args[0], args[1]
	default:
		return usageErrorf("get takes TYPE, TYPE NAME or TYPE/NAME, got %d arguments", len(args))
	}
	if strings.Contains(o.NameArg, "/") {
		return usageErrorf("NAME %q must not contain \"/\"", o.NameArg)
	}
	return nil
}

// Validate checks the flags and their combinations.
func (o *GetOptions) Validate() error {
	if o.TypeArg != "" && o.AllTypes {
		return usageErrorf("give TYPE or --all-types, not both")
	}
	if o.ChunkSize < 0 {
		return usageErrorf("--chunk-size must be 0 (one request) or more, not %d", o.ChunkSize)
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return usageErrorf("--selector: %v", err)
	}
	if o.Selector != "" && o.NameArg != "" {
		return usageErrorf("give NAME or --selector, not both")
	}
	for i, ph := range o.Phases {
		canon, ok := canonicalPhase(ph)
		if !ok {
			return usageErrorf("--phase %q: want one of %s", ph, strings.Join(phaseNames(), ", "))
		}
		o.Phases[i] = canon
	}
	return validateOutput(o.Output)
}

// phaseNames lists the phases a workload can have, in the order the status
// mappings are evaluated.
func phaseNames() []string {
	out := make([]string, 0, len(allPhases))
	for _, p := range allPhases {
		out = append(out, string(p))
	}
	return out
}

var allPhases = []kartav1alpha1.ResourceStatus{
	kartav1alpha1.StatusResuming, kartav1alpha1.StatusSuspending, kartav1alpha1.StatusSuspended,
	kartav1alpha1.StatusRunning, kartav1alpha1.StatusFailed, kartav1alpha1.StatusCompleted,
	kartav1alpha1.StatusInitializing, kartav1alpha1.StatusDegraded, kartav1alpha1.StatusUndefined,
}

// canonicalPhase spells a phase as the status vocabulary does, whatever
// its case.
func canonicalPhase(s string) (string, bool) {
	for _, p := range allPhases {
		if strings.EqualFold(s, string(p)) {
			return string(p), true
		}
	}
	return "", false
}

// hasPhase reports whether any of the row's phases is one of want.
func hasPhase(row WorkloadRow, want []string) bool {
	for _, p := range row.Phases {
		if slices.Contains(want, p) {
			return true
		}
	}
	return false
}

// listObjects lists one resource in pages of chunk objects (0: one request)
// through client-go's pager, which also falls back to one full list when a
// continue token expires.
func listObjects(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions, chunk int64) ([]*unstructured.Unstructured, error) {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, opts)
	}))
	p.PageSize = chunk
	var out []*unstructured.Unstructured
	err := p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("unexpected list item %T", obj)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// kindToList is one kind get lists, with the definition that reads it.
type kindToList struct {
	ent     *catalog.Entry
	mapping *meta.RESTMapping
}

// listableKind picks how to list gk: at the version of a definition the
// cluster serves (the API server converts every object to it), else at the
// preferred version with the definition Resolve finds for it. A kind the
// cluster does not serve, or no definition fits, is left out (with a
// warning for the latter).
func (o *GetOptions) listableKind(c *Cluster, defs *definitions, gk schema.GroupKind) (kindToList, bool) {
	for _, ent := range defs.reg.ForKind(gk) {
		if ent.Compiled == nil {
			continue
		}
		if m, err := c.Mapper.RESTMapping(gk, ent.Version); err == nil {
			return kindToList{ent, m}, true
		}
	}
	m, ok := served(c.Mapper, gk)
	if !ok {
		return kindToList{}, false
	}
	ent, err := defs.forGVK(m.GroupVersionKind)
	if err != nil {
		o.env.warnf("%s: %v", m.Resource.Resource, err)
		return kindToList{}, false
	}
	return kindToList{ent, m}, true
}

// Run lists the workloads.
func (o *GetOptions) Run(ctx context.Context) error {
	return reportNoDefinition(o.Out, o.Output, o.TypeArg, o.run(ctx))
}

func (o *GetOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	c, err := o.env.Cluster()
	if err != nil {
		return err
	}
	defs, err := o.env.loadDefinitions(ctx, c)
	if err != nil {
		return err
	}
	ns := ""
	if !o.AllNamespaces {
		ns = *o.env.ConfigFlags.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
	}

	var kinds []kindToList
	if o.TypeArg != "" {
		rt, err := resolveType(c.Mapper, o.TypeArg)
		if err != nil {
			if isUnreachable(err) {
				return apiError("discover types", err)
			}
			return unknownTypeError(o.TypeArg, defs, c)
		}
		ent, err := defs.forGVK(rt.GVK)
		if err != nil {
			return err
		}
		kinds = append(kinds, kindToList{ent, rt.Mapping})
	} else {
		seen := map[schema.GroupKind]bool{}
		for _, e := range defs.reg.List() {
			if e.Err != nil || seen[e.GroupKind] {
				continue
			}
			seen[e.GroupKind] = true
			if k, ok := o.listableKind(c, defs, e.GroupKind); ok {
				kinds = append(kinds, k)
			}
		}
	}

	// The workloads, top-level only.
	type workload struct {
		obj *unstructured.Unstructured
		ent *catalog.Entry
	}
	var wls []workload
	// An object is top-level when no controller above it has a definition,
	// however many undefined objects sit in between: a Deployment's pods
	// (pod → ReplicaSet → Deployment) belong to the Deployment.
	topWalker := newOwnerWalker(clusterOwnerLookup(c))
	ownedByDefined := func(obj *unstructured.Unstructured) bool {
		refs, err := topWalker.refs(ctx, obj)
		if err != nil {
			o.env.warnf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		for _, ref := range refs {
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
				if _, ok := defs.reg.LookupGVK(gv.WithKind(ref.Kind)); ok {
					return true
				}
			}
		}
		return false
	}
	// owned counts, per resource, the objects left out because a defined
	// workload above them owns them, so "nothing found" can say so.
	owned := map[string]int{}
	for _, k := range kinds {
		ri := c.Dynamic.Resource(k.mapping.Resource)
		var rif dynamic.ResourceInterface = ri
		if k.mapping.Scope.Name() == meta.RESTScopeNameNamespace && ns != "" {
			rif = ri.Namespace(ns)
		}
		var items []*unstructured.Unstructured
		if o.NameArg != "" {
			var obj *unstructured.Unstructured
			obj, err = rif.Get(ctx, o.NameArg, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				where := ""
				if ns != "" && k.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
					where = " in namespace " + ns
				}
				return notFoundErrorf("%s %q not found%s", k.mapping.GroupVersionKind.Kind, o.NameArg, where)
			}
			if err != nil {
				return apiError("get "+k.mapping.Resource.Resource+" "+o.NameArg, err)
			}
			// A named workload is shown even when a defined workload
			// owns it: the user asked for it.
			wls = append(wls, workload{obj, k.ent})
			continue
		}
		items, err = listObjects(ctx, rif, metav1.ListOptions{LabelSelector: o.Selector}, o.ChunkSize)
		if err != nil {
			if isUnreachable(err) {
				return apiError("list "+k.mapping.Resource.Resource, err)
			}
			o.env.warnf("cannot list %s: %v", k.mapping.Resource.Resource, err)
			continue
		}
		for _, obj := range items {
			if ownedByDefined(obj) {
				owned[k.mapping.Resource.Resource]++
				continue
			}
			wls = append(wls, workload{obj, k.ent})
		}
	}

	// Pods and PodGroups, once for all workloads.
	byUID := map[types.UID]int{}
	for i, w := range wls {
		byUID[w.obj.GetUID()] = i
	}
	podsOf := make([][]*corev1.Pod, len(wls))
	pgOf := make([][]*podGroupInfo, len(wls))
	if len(wls) > 0 {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return apiError("list pods", err)
		}
		walker := newOwnerWalker(clusterOwnerLookup(c))
		for i := range pods.Items {
			walker.remember(&pods.Items[i])
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if wi, ok := byUID[p.UID]; ok {
				// A pod listed as a workload is its own only pod (as
				// describe shows it): pods below it belong higher up.
				podsOf[wi] = append(podsOf[wi], p)
				continue
			}
			chain, err := walker.chain(ctx, p)
			if err != nil {
				o.env.warnf("pod %s/%s: %v", p.Namespace, p.Name, err)
			}
			for _, u := range chain {
				if wi, ok := byUID[u]; ok {
					if !isPod(wls[wi].obj) {
						podsOf[wi] = append(podsOf[wi], p)
					}
					break
				}
			}
		}
		if _, err := c.Mapper.RESTMapping(podGroupGK, podGroupGVR.Version); err == nil {
			var pgs *unstructured.UnstructuredList
			if ns != "" {
				pgs, err = c.Dynamic.Resource(podGroupGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			} else {
				pgs, err = c.Dynamic.Resource(podGroupGVR).List(ctx, metav1.ListOptions{})
			}
			if err != nil {
				o.env.warnf("cannot list PodGroups: %v", err)
			} else {
				for i := range pgs.Items {
					pg := &pgs.Items[i]
					for _, r := range pg.GetOwnerReferences() {
						if wi, ok := byUID[r.UID]; ok {
							pgOf[wi] = append(pgOf[wi], podGroupFrom(pg))
							break
						}
					}
				}
			}
		}
	}

	now := o.env.Now()
	rows := make([]WorkloadRow, 0, len(wls))
	filtered := 0
	refs := liveRefs(c)
	for i, w := range wls {
		rctx, refWarnings := refs.bind(ctx, w.ent.Compiled, w.obj)
		for _, msg := range refWarnings {
			o.env.warnf("%s %s/%s: %s", w.obj.GetKind(), w.obj.GetNamespace(), w.obj.GetName(), msg)
		}
		row := workloadRow(rctx, w.obj, w.ent, podsOf[i], pgOf[i], now, o.env.gpuNames())
		if len(o.Phases) > 0 && !hasPhase(row, o.Phases) {
			filtered++
			continue
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	if len(rows) == 0 && filtered > 0 && o.Output != "json" && o.Output != "yaml" {
		fmt.Fprintf(o.ErrOut, "No workloads with phase %s (%d found with other phases).\n", strings.Join(o.Phases, " or "), filtered)
		return nil
	}
	return o.print(rows, ns, owned)
}

func (o *GetOptions) print(rows []WorkloadRow, ns string, owned map[string]int) error {
	if o.Output == "json" || o.Output == "yaml" {
		return printData(o.Out, o.Output, WorkloadList{Items: rows})
	}
	if len(rows) == 0 {
		where := ""
		if ns != "" {
			where = " in namespace " + ns
		}
		fmt.Fprintf(o.ErrOut, "No top-level workloads found%s.\n", where)
		// muster get lists what no defined workload owns; say what was
		// left out, or a user with pods in front of them reads "none".
		res := make([]string, 0, len(owned))
		for r := range owned {
			res = append(res, r)
		}
		sort.Strings(res)
		for _, r := range res {
			fmt.Fprintf(o.ErrOut, "%d %s%s belong to other workloads; muster get lists only the top-level ones (muster get --all-types, or muster describe %s/NAME for one).\n",
				owned[r], r, where, strings.TrimSuffix(r, "s"))
		}
		return nil
	}
	return renderWorkloads(o.Out, newPainter(o.env, o.Out), rows, o.AllNamespaces, o.Output == "wide")
}

// workloadRow summarises one workload for get.
func workloadRow(ctx context.Context, obj *unstructured.Unstructured, ent *catalog.Entry, pods []*corev1.Pod, pgs []*podGroupInfo, now time.Time, gpuNames []corev1.ResourceName) WorkloadRow {
	r := WorkloadRow{
		Namespace:  obj.GetNamespace(),
		Kind:       obj.GetKind(),
		APIVersion: obj.GetAPIVersion(),
		Name:       obj.GetName(),
		Definition: ent.Name,
		Phases:     []string{},
	}
	if ts := obj.GetCreationTimestamp().Time; !ts.IsZero() {
		r.Created = ts.UTC().Format(time.RFC3339)
		r.Age = duration.HumanDuration(now.Sub(ts))
	}
	cp := ent.Compiled
	if st, err := cp.Status(ctx, obj); err == nil {
		for _, s := range st.Statuses {
			r.Phases = append(r.Phases, string(s))
		}
	}
	if len(r.Phases) == 0 {
		r.Phases = []string{string(kartav1alpha1.StatusUndefined)}
	}
	wl, err := cp.Extract(ctx, obj)
	if err != nil {
		r.Error = oneLine(err.Error())
	} else {
		for _, c := range wl.Components {
			if !c.HasPods {
				continue
			}
			for _, inst := range c.Instances {
				r.Pods += inst.Pods
				if inst.Template != nil {
					r.GPUs += requestsOf(&inst.Template.Spec, gpuNames).gpus * inst.Pods
				}
			}
		}
	}
	nodes := map[string]bool{}
	boundByPG := map[string]int{}
	unschedulablePG := map[string]bool{}
	for _, p := range pods {
		if n := p.Labels[api.LabelPodGroup]; n != "" && p.Spec.NodeName == "" && unschedulable(p) {
			unschedulablePG[n] = true
		}
		if podutils.IsPodReady(p) {
			r.ReadyPods++
		}
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
			// A gang is bound by members that will stay: not one being
			// deleted or already failed (describe counts the same way).
			if n := p.Labels[api.LabelPodGroup]; n != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
				boundByPG[n]++
			}
		}
	}
	for n := range nodes {
		r.Nodes = append(r.Nodes, n)
	}
	sort.Strings(r.Nodes)
	if plans, err := cp.GangPlans(ctx, obj); err == nil {
		for _, pl := range plans {
			r.Gangs += pl.Instances
		}
	}
	if len(pgs) > r.Gangs {
		r.Gangs = len(pgs)
	}
	for _, pg := range pgs {
		if pg.Priority != nil && (r.Priority == nil || *pg.Priority > *r.Priority) {
			r.Priority = pg.Priority
		}
		switch {
		case pg.MinMember > 0 && int32(boundByPG[pg.Name]) >= pg.MinMember:
			r.GangsBound++
		case unschedulablePG[pg.Name]:
			r.GangsUnschedulable++
		}
	}
	return r
}

// unschedulable reports whether the scheduler said it cannot place pod.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Package definition decodes, validates, compiles and evaluates workload
// definitions (the Karta format, run.ai/v1alpha1): where a workload type keeps
// its roles, pod templates and replica counts, how its status reads, and how
// its pods form gangs.
//
// # Pipeline
//
// Decode reads a definition strictly (unknown fields and wrong types are
// errors naming the field path). Compile validates it (Validate returns the
// same list of *field.Error) and compiles every jq expression once; the
// *Compiled is safe for concurrent use and never parses again.
//
// # jq
//
// A definition is code written by whoever may create a Karta, so every
// evaluation is bounded in time and memory, whatever the expression does
// (see package jq, the sandbox every expression runs in, for the mechanism):
//
//   - Size: an expression is at most MaxExpressionBytes long and
//     MaxExpressionNesting deep; a definition has at most MaxComponents
//     components and MaxListItems items in every other list.
//   - Functions: only these jq builtins, besides the functions the
//     expression defines: empty, error, not, length, utf8bytelength, type,
//     keys, keys_unsorted, values, has, in, contains, inside, getpath, path,
//     select, map, map_values, to_entries, from_entries, with_entries, add,
//     any, all, isempty, first, last, nth, limit, flatten, reverse, sort,
//     sort_by, group_by, unique, unique_by, min, max, min_by, max_by, index,
//     rindex, indices, floor, ceil, round, sqrt, fabs, abs, infinite, nan,
//     isinfinite, isnan, isnormal, tostring, tonumber, tojson, fromjson,
//     toarray, startswith, endswith, ltrimstr, rtrimstr, ascii_downcase,
//     ascii_upcase, split/1, join, and the type selectors (objects, arrays,
//     strings, numbers, booleans, nulls, iterables, scalars). No loops of
//     jq's own (range, repeat, while, until, recurse, walk, ..), no
//     assignments or del, no @formats, no regular expressions, nothing that
//     reaches outside the document (env, $ENV, input, debug, $__loc__, …).
//   - No recursion: a function that calls itself, directly or through
//     others, is refused.
//   - Each evaluation stops after MaxEvalSteps jq instructions, after
//     Options.Timeout (default 1s), after Options.MaxResults values (default
//     10000), and when +, *, /, string interpolation or a function that
//     builds bigger values (tostring, tojson, add, join, split, …) would
//     build more than MaxEvalBytes (64 MiB) in all.
//   - Counts: a replica count, a component's pod count and a gang's
//     min-member are at most MaxCount (100,000).
//
// Paths in podSelector, groupByKeyPaths and filters run on the pod; all others
// on the root object.
//
// # Instances and counts
//
// A component with instanceIdPath has one instance per value of that path;
// its other paths yield one value per instance, index-aligned with the ids,
// or one value that applies to every instance. A component without it has
// one instance with ID "". A child instance's parent instance is the parent
// instance with the same ID or, when the parent has exactly one instance,
// that one; anything else is an error. A component whose parent is absent
// is absent too.
//
// Counts follow Workload Map: every path runs on the whole root object and
// its value is the component's own count in the whole workload, never
// multiplied by the parent's (replicas default to 1; null means unset;
// numbers may be integers, whole floats or numeric strings). A
// leader/worker workload with 2 groups of 1 leader and 3 workers writes
// the leader's count as the number of groups (2) and the worker's as
// groups × 3 (6). So, per instance,
//
//	Pods(C, i)    = Replicas(C, i)                       (C has pods)
//	MinPods(C, i) = MinReplicas(C, i), else Replicas(C, i)
//	Pods(G, i)    = Σ Pods of G's child instances under i  (G has no pods)
//
// A grouping component's own replicas are kept as read (Instance.Replicas):
// they do not add pods, but a gang scope uses them (see Gangs).
//
// A component whose template path (podTemplateSpecPath or podSpecPath)
// yields null or nothing for an instance, or whose fragmented paths and
// replicasPath all find nothing (a fragmented template of defaults only
// with a count is there: a TrainJob trainer taken from its runtime), is
// absent there: the instance is left out, with 0 pods, and so
// is its subtree. A PyTorchJob without workers or an InferenceService
// without a transformer is a workload without that role, not an error.
// Workload Map's engine counts such a component as one pod; muster does not.
//
// # Pods
//
// MatchPod finds the component of a pod. A component matches when its
// podSelector.componentTypeSelector holds on the pod: every matchLabels
// entry is a label of the pod, and keyPath yields value (compared as text)
// or, without value, something other than null, false and "". When several
// components match, the most specific wins: the deepest in the tree, then
// one that compares a value over one that only tests a key, then the one
// with more matchLabels, then the first in definition order. When no
// component has a componentTypeSelector and exactly one component has pods,
// that component matches every pod. The instance is the value of the
// component's componentInstanceSelector.idPath on the pod; the replica is
// the value of the replicaSelector.keyPath of the component or, without
// one, of its nearest ancestor that has one.
//
// # Gangs
//
// Older form (podGroups): a pod belongs to the first gang definition with a
// member that is the pod's component, or an ancestor of it, and whose
// filters all hold on the pod (each filter yields at least one value and
// only true). Within that definition the member closest to the pod's
// component is used. The gang instance is named by the values of that
// member's groupByKeyPaths on the pod; each must yield exactly one
// non-empty string, number or boolean.
//
// The counted components of a definition are its members, or, for a member
// without pods, the components with pods below it. A member needs only to
// name a component: one with no pods anywhere below it is valid and counts
// nobody.
//
// Without groupByKeyPaths on any member the gang is the whole workload:
// MinMember = Σ over counted components and their instances of MinPods.
//
// With groupByKeyPaths the gang instances share the counted components'
// totals. The scope component is the lowest common ancestor of the
// members' parents (the root when every member is a child of the root);
// each scope instance has N gang instances:
//
//   - N = ⌈T / S⌉ when the gang's only member has no pods of its own and
//     reads its own count S (its minReplicas, else replicas): S is the size
//     of one gang instance, as the Workload Map catalog writes a
//     leader/worker group (group replicas = size);
//   - N = the scope instance's own replicas otherwise (the groups of a
//     leader/worker set, the replicas of a clique set);
//
// where T is Σ MinPods of the counted instances below the scope instance.
// MinMember of a gang instance is Σ over those counted instances of
// ⌈MinPods / N⌉, and MinResources the same pods' requests: rounding up
// never loosens a gang. A leader-worker workload with 2 groups of 1 leader
// and 3 workers grouped per group has MinMember 4 either way, not 8, and
// not the 32 (4 × 8) that KAI's grouper, which sizes gangs from Workload
// Map definitions, computes for the first form. GangPlan.Instances is N.
//
// Newer form (podGroup): one whole-workload gang over the subGroups'
// components (every component with pods when subGroups is empty), named
// after the root component unless it has a name; topology.requiredTopologyLevel
// and preferredTopologyLevel give Gang.TopologyRequired and TopologyPreferred.
// Per-subgroup topology is validated but not evaluated.
//
// MinResources is the sum of PodRequests of the counted pods' templates.
//
// Workload annotations override a definition for one workload:
// muster.io/gang: "off" puts none of its pods in a gang; muster.io/min-member:
// "N" (a positive integer) sets MinMember of every gang of the workload and
// Gang.Overridden — and, when the definition has no gang instruction (a
// Deployment, a StatefulSet, a Job), makes the whole workload one gang
// named after the root component, so the override works for every kind; MinResources then stays the definition's when N is at
// least the definition's min-member and is scaled down to N/MinMember of it,
// rounded up per resource, when N is smaller. muster.io/topology-required and
// muster.io/topology-preferred replace the topology fields (they do not set
// Overridden).
//
// GangForPod answers for one pod; GangPlans answers per gang definition from
// the root object alone. Both reuse what they computed for a root object
// while its UID and resourceVersion stay the same.
//
// # References
//
// A definition may read objects other than its root (a TrainJob's node
// count lives in the (Cluster)TrainingRuntime it names). It declares them
// in the Karta annotation muster.io/references, a YAML or JSON list:
//
//	muster.io/references: |
//	  - name: runtime                   # read as $runtime
//	    namePath: .spec.runtimeRef.name  # on the root: the object's name
//	    kindPath: .spec.runtimeRef.kind // "ClusterTrainingRuntime"
//	    kinds:                           # the kinds kindPath may name
//	    - {group: trainer.kubeflow.org, version: v1alpha1, kind: ClusterTrainingRuntime, scope: Cluster}
//	    - {group: trainer.kubeflow.org, version: v1alpha1, kind: TrainingRuntime}
//
// It is an annotation, not a spec field, so the document still applies to
// a cluster with Workload Map's Karta CRD (whose schema would prune an
// unknown field) and runs in Workload Map's engine, which ignores it. At
// most MaxReferences references; kindPath is needed with more than one
// kind; scope is Namespaced (the default: the root's namespace, never
// another) or Cluster. namePath and kindPath run on the root and may not
// read references; a namePath yielding null, "" or nothing names no object.
//
// Root-side expressions read the object as $name (null when there is
// none); pod-side ones (podSelector, groupByKeyPaths, filters) cannot,
// since what a pod matches is remembered per pod. An expression may not
// bind a reference's name itself. Callers bind the objects with
// WithReferences (Targets says which the root names; Resolve finds them in
// a list). An object named but unreadable is bound unresolved: an
// evaluation that reads it fails with *UnresolvedError, even under // or
// try, and one that does not is unaffected. So a TrainJob that states
// numNodes is grouped whether its runtime exists or not, and one that
// leaves it to a runtime not yet created waits (the pod-grouper holds its
// pods with the reason) instead of being grouped as a gang of 1. The plan
// cache keys on the bound objects' UIDs and resourceVersions. A definition
// without references compiles and runs exactly as before.
//
// Two more Karta annotations read a gang's topology from the workload:
// muster.io/topology-required-path and muster.io/topology-preferred-path,
// jq on the root (references allowed) yielding a node label key, or null,
// "" or nothing for none. They apply to every gang of the definition, after
// the definition's own topology levels and before the workload annotations
// muster.io/topology-required / -preferred, which win (the path is then not
// evaluated). A value that is not a label key is an *EvalError. Grove's
// PodCliqueSet resolves its topology domain through its
// ClusterTopologyBinding this way.
//
// # Cost
//
// Compile also works out which parts of a pod the pod-side paths can read
// (walking their syntax; anything it cannot follow counts as the whole
// pod), so MatchPod and GangForPod convert only those parts, and read a
// path of constant keys such as .metadata.labels["k"] straight from the pod
// without running jq. The answer for the last pod asked about is kept by
// UID and resourceVersion, since the pod-grouper asks MatchPod and then
// GangForPod about each pod.
package definition

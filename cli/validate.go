package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/definition/jq/schemacheck"
	"github.com/muster-io/muster/internal/crdschema"
)

const validateLong = `Check definition files (Karta, run.ai/v1alpha1) without installing them.

Documents in the format's earlier name (optimization.nvidia.com/v1alpha1, kind
ResourceInterface: the same fields) are read as Karta with a deprecation warning;
--convert prints every document in the Karta form instead of the report, ready to
apply.

Every document of FILE is decoded strictly (an unknown field is an error), validated
(structure, component tree, jq paths: no assignments, no recursion, nothing that
reaches outside the document) and compiled.

With --crd CRD.yaml, or --cluster to read the CRD from the current cluster, every path
that runs on the workload object is also checked against the CRD's OpenAPI v3 schema,
and paths that cannot exist there are reported (.spec.replicatedJob when the field is
replicatedJobs). Paths that run on pods (podSelector, groupByKeyPaths, filters) are
not checked against the CRD.

Exit code 0 when every definition is valid, 1 when one is not, 2 when FILE cannot be
read.`

const validateExample = `  # Validate a definition you are writing
  muster validate my-definition.yaml

  # Also check its paths against the CRD of the kind it targets
  muster validate my-definition.yaml --crd jobset-crd.yaml

  # ... or against the CRD installed in the current cluster
  muster validate my-definition.yaml --cluster

  # Turn old ResourceInterface definitions into Kartas
  muster validate old-definitions.yaml --convert > kartas.yaml

  # In a script: the exit code says it all
  muster validate defs.yaml -o json > report.json || echo "invalid"`

// ValidateOptions are the options of "muster validate".
type ValidateOptions struct {
	env *Env

	Filename string
	CRDFile  string
	Cluster  bool
	Output   string
	// Convert prints the Karta form of every document instead of the
	// report.
	Convert bool

	genericiooptions.IOStreams
}

// NewCmdValidate returns the validate command.
func NewCmdValidate(env *Env) *cobra.Command {
	o := &ValidateOptions{env: env, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "validate FILE [--crd CRD.yaml | --cluster] [-o table|json|yaml] [--convert]",
		DisableFlagsInUseLine: true,
		Short:                 "Validate definition files, optionally against the target CRD's schema",
		Long:                  validateLong,
		Example:               validateExample,
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: runOptions(o),
	}
	cmd.Flags().StringVar(&o.CRDFile, "crd", "", "Check paths against the schema of this CRD file (multi-document files are searched for the root kind)")
	cmd.Flags().BoolVar(&o.Cluster, "cluster", false, "Check paths against the schema of the CRD installed in the current cluster")
	cmd.Flags().BoolVar(&o.Convert, "convert", false, "Print every definition in the Karta form (run.ai/v1alpha1), e.g. to convert deprecated ResourceInterface documents; -o json prints JSON")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete takes the file argument.
func (o *ValidateOptions) Complete(args []string) error {
	if len(args) != 1 {
		return usageErrorf("validate takes one FILE (\"-\" for stdin), got %d arguments", len(args))
	}
	o.Filename = args[0]
	return nil
}

// Validate checks the flags.
func (o *ValidateOptions) Validate() error {
	if o.CRDFile != "" && o.Cluster {
		return usageErrorf("give --crd or --cluster, not both")
	}
	return validateOutput(o.Output)
}

// Run validates every definition of the file.
func (o *ValidateOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	data, err := o.env.readInput(o.Filename)
	if err != nil {
		return err
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return usageErrorf("%s: not YAML or JSON: %v", o.Filename, err)
	}
	if len(docs) == 0 {
		return usageErrorf("%s: no documents", o.Filename)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if o.CRDFile != "" {
		if crds, err = o.readCRDs(); err != nil {
			return err
		}
	}
	res := ValidationResult{File: o.Filename, Valid: true}
	var converted []*kartav1alpha1.Karta
	for i, doc := range docs {
		dr, k := o.validateDoc(ctx, i, doc, crds)
		if !dr.Valid {
			res.Valid = false
		}
		if dr.Deprecated != "" {
			o.env.warnf("%s: %s", o.Filename, dr.Deprecated)
		}
		res.Definitions = append(res.Definitions, dr)
		converted = append(converted, k)
	}
	if o.Convert {
		return o.printConverted(res, converted)
	}
	if o.Output == "json" || o.Output == "yaml" {
		if err := printData(o.Out, o.Output, res); err != nil {
			return err
		}
	} else {
		p := newPainter(o.env, o.Out)
		for _, dr := range res.Definitions {
			if dr.Valid {
				// Without a schema a typo such as .spec.replica is a valid
				// jq path that reads null: say the paths went unchecked.
				checked := " (paths not checked against a schema: pass --crd FILE or --cluster)"
				if dr.SchemaChecked {
					checked = " (paths checked against the CRD schema)"
				}
				fmt.Fprintf(o.Out, "%s: %s: %s%s\n", o.Filename, dr.Name, p.status("valid"), checked)
				continue
			}
			fmt.Fprintf(o.Out, "%s: %s: %s\n", o.Filename, dr.Name, p.bad("invalid ("+plural(int64(len(dr.Problems)), "problem")+")"))
			for _, pr := range dr.Problems {
				fmt.Fprintf(o.Out, "  - %s\n", pr)
			}
		}
	}
	if !res.Valid {
		n := 0
		for _, dr := range res.Definitions {
			if !dr.Valid {
				n++
			}
		}
		return invalidErrorf("%s: %d of %d definitions invalid", o.Filename, n, len(res.Definitions))
	}
	return nil
}

// printConverted prints the Karta form of every document, or nothing
// and the problems when one is invalid: a half-converted file is worse than
// none.
func (o *ValidateOptions) printConverted(res ValidationResult, ks []*kartav1alpha1.Karta) error {
	if !res.Valid {
		var probs []string
		for _, dr := range res.Definitions {
			for _, pr := range dr.Problems {
				probs = append(probs, dr.Name+": "+pr)
			}
		}
		return invalidErrorf("%s: not converted, it has invalid definitions: %s", o.Filename, strings.Join(probs, "; "))
	}
	for i, k := range ks {
		if i > 0 && o.Output != "json" {
			if _, err := fmt.Fprintln(o.Out, "---"); err != nil {
				return err
			}
		}
		format := "yaml"
		if o.Output == "json" {
			format = "json"
		}
		if err := printKarta(o.Out, format, k); err != nil {
			return err
		}
	}
	return nil
}

func (o *ValidateOptions) validateDoc(ctx context.Context, i int, doc []byte, crds []*apiextensionsv1.CustomResourceDefinition) (DefinitionResult, *kartav1alpha1.Karta) {
	dr, k := o.checkDoc(ctx, i, doc, crds)
	if k != nil && definition.IsLegacy(k) {
		dr.Deprecated = definition.LegacyNotice(dr.Name)
	}
	return dr, k
}

func (o *ValidateOptions) checkDoc(ctx context.Context, i int, doc []byte, crds []*apiextensionsv1.CustomResourceDefinition) (DefinitionResult, *kartav1alpha1.Karta) {
	dr := DefinitionResult{Name: fmt.Sprintf("document %d", i+1), Valid: true}
	k, err := definition.Decode(doc)
	if err != nil {
		dr.Valid = false
		dr.Problems = append(dr.Problems, oneLine(err.Error()))
		return dr, nil
	}
	if k.Name != "" {
		dr.Name = k.Name
	}
	if _, err := definition.Compile(k, o.env.definitionOptions()); err != nil {
		dr.Valid = false
		dr.Problems = append(dr.Problems, validationProblems(err)...)
	}
	if o.CRDFile == "" && !o.Cluster {
		return dr, k
	}
	root := k.Spec.StructureDefinition.RootComponent.Kind
	if root == nil {
		return dr, k
	}
	gvk := schema.GroupVersionKind{Group: root.Group, Version: root.Version, Kind: root.Kind}
	var crd *apiextensionsv1.CustomResourceDefinition
	if o.Cluster {
		crd, err = o.clusterCRD(ctx, gvk.GroupKind())
		if err != nil {
			dr.Valid = false
			dr.Problems = append(dr.Problems, err.Error())
			return dr, k
		}
	} else {
		for _, c := range crds {
			if c.Spec.Group == gvk.Group && c.Spec.Names.Kind == gvk.Kind {
				crd = c
			}
		}
		if crd == nil {
			dr.Valid = false
			dr.Problems = append(dr.Problems, fmt.Sprintf("%s has no CRD for %s in group %q", o.CRDFile, gvk.Kind, gvk.Group))
			return dr, k
		}
	}
	var s *apiextensionsv1.JSONSchemaProps
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
		if v.Name == gvk.Version && v.Schema != nil {
			s = v.Schema.OpenAPIV3Schema
		}
	}
	if s == nil {
		dr.Valid = false
		dr.Problems = append(dr.Problems, fmt.Sprintf("spec.structureDefinition.rootComponent.kind.version: CRD %s has no schema for version %q (versions: %s)", crd.Name, gvk.Version, strings.Join(versions, ", ")))
		return dr, k
	}
	dr.SchemaChecked = true
	for _, p := range catalog.RootObjectPaths(k) {
		problems, err := schemacheck.Check(p.Expr, s)
		if err != nil {
			continue // the validator above reported the parse error
		}
		for _, pr := range problems {
			dr.Valid = false
			dr.Problems = append(dr.Problems, fmt.Sprintf("%s: %q: %s (schema of %s %s)", p.Field, p.Expr, pr.Message, gvk.Kind, gvk.Version))
		}
	}
	return dr, k
}

func (o *ValidateOptions) readCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := o.env.readInput(o.CRDFile)
	if err != nil {
		return nil, err
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, usageErrorf("%s: not YAML or JSON: %v", o.CRDFile, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := jsonStrictDecoder(strings.NewReader(string(doc))).Decode(crd); err != nil {
			return nil, usageErrorf("%s: document %d is not a CustomResourceDefinition: %v", o.CRDFile, i+1, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, usageErrorf("%s: no CustomResourceDefinition in the file", o.CRDFile)
	}
	return out, nil
}

// clusterCRD reads the CRD that serves gk from the cluster.
func (o *ValidateOptions) clusterCRD(ctx context.Context, gk schema.GroupKind) (*apiextensionsv1.CustomResourceDefinition, error) {
	c, err := o.env.Cluster()
	if err != nil {
		return nil, err
	}
	m, err := c.Mapper.RESTMapping(gk)
	if err != nil {
		return nil, fmt.Errorf("the cluster does not serve %s (group %q)", gk.Kind, gk.Group)
	}
	u, err := c.Dynamic.Resource(crdschema.GVR).Get(ctx, m.Resource.Resource+"."+gk.Group, metav1.GetOptions{})
	if err != nil {
		return nil, apiError("read the CRD of "+gk.Kind, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, fmt.Errorf("read the CRD of %s: %v", gk.Kind, err)
	}
	return crd, nil
}

// validationProblems lists the problems in a compile error, one line each
// with its field path.
func validationProblems(err error) []string {
	var ve *definition.ValidationError
	if errors.As(err, &ve) && len(ve.Errs) > 0 {
		out := make([]string, 0, len(ve.Errs))
		for _, e := range ve.Errs {
			var fe *field.Error
			if errors.As(e, &fe) {
				out = append(out, oneLine(fe.Error()))
				continue
			}
			out = append(out, oneLine(e.Error()))
		}
		return out
	}
	return []string{oneLine(err.Error())}
}

// validationSummary is the first problem and a count, for one-line errors.
func validationSummary(err error) string {
	ps := validationProblems(err)
	if len(ps) == 1 {
		return ps[0]
	}
	return fmt.Sprintf("%s (and %s more)", ps[0], plural(int64(len(ps)-1), "problem"))
}

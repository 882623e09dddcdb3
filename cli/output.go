package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// outputFormats are the values of -o every command takes.
var outputFormats = []string{"table", "wide", "json", "yaml"}

func addOutputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", *p, "Output format: table, wide, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

func validateOutput(o string) error {
	for _, f := range outputFormats {
		if o == f {
			return nil
		}
	}
	return usageErrorf("-o must be one of %s, not %q", strings.Join(outputFormats, ", "), o)
}

// printData writes v as indented JSON or as YAML, both from the json tags
// of the view structs so the two never disagree.
func printData(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if format == "yaml" {
		data, err = yaml.JSONToYAML(data)
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// splitDocuments splits a YAML (or JSON) stream into JSON documents,
// skipping empty ones.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out [][]byte
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := r.Decode(&raw)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		out = append(out, raw)
	}
}

func jsonStrictDecoder(r io.Reader) *json.Decoder {
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	return d
}

// painter colours words for a terminal; a zero painter prints them plain.
type painter struct{ on bool }

// newPainter decides colour once per command: always and never are
// obeyed; auto colours only a terminal, and never when NO_COLOR is set
// (https://no-color.org).
func newPainter(env *Env, w io.Writer) painter {
	switch env.Color {
	case "always":
		return painter{on: true}
	case "never":
		return painter{}
	}
	if env.Getenv != nil && env.Getenv("NO_COLOR") != "" {
		return painter{}
	}
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return painter{on: ok && term.IsTerminal(int(f.Fd()))}
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

func (p painter) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (p painter) bold(s string) string { return p.paint(ansiBold, s) }
func (p painter) dim(s string) string  { return p.paint(ansiDim, s) }

// status colours a phase or status word by what it means to a person:
// green good, yellow waiting, red broken.
func (p painter) status(s string) string {
	switch s {
	case "Running", "Ready", "Completed", "Succeeded", "Bound", "Scheduled", "Finished", "Active", "yes":
		return p.paint(ansiGreen, s)
	case "Pending", "Initializing", "Scheduling", "PreScheduling", "Suspended", "Suspending", "Resuming", "Undefined", "Planned":
		return p.paint(ansiYellow, s)
	case "Failed", "Degraded", "Error", "Unschedulable", "SchedulerError", "no":
		return p.paint(ansiRed, s)
	}
	return s
}

func (p painter) bad(s string) string { return p.paint(ansiRed, s) }

// Human units for tables (JSON keeps raw numbers).
func formatCPU(milli int64) string {
	if milli == 0 {
		return "0"
	}
	return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
}

func formatMemory(b int64) string {
	const gi, ti = int64(1) << 30, int64(1) << 40
	switch {
	case b >= ti && b%ti == 0:
		return fmt.Sprintf("%dTi", b/ti)
	case b >= gi && b%gi == 0:
		// 2000Gi reads better than 1.95Ti when sizing GPU nodes.
		return fmt.Sprintf("%dGi", b/gi)
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", ti}, {"Gi", gi}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size {
			if b%u.size == 0 {
				return fmt.Sprintf("%d%s", b/u.size, u.suffix)
			}
			return fmt.Sprintf("%.1f%s", float64(b)/float64(u.size), u.suffix)
		}
	}
	return fmt.Sprintf("%d", b)
}

// Command rbacgen writes the pod-grouper's catalog read role (see package
// rbacgen) to every path given, or with -check reports the paths whose
// content differs from what the catalog gives and exits 1.
//
//	go run ./hack/rbacgen/cmd/rbacgen manifests/rbac/podgrouper-catalog-read.yaml
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/hack/rbacgen"
)

func main() {
	check := flag.Bool("check", false, "do not write; exit 1 when a file differs from the generated role")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: rbacgen [-check] FILE...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*check, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "rbacgen:", err)
		os.Exit(1)
	}
}

func run(check bool, paths []string) error {
	defs, err := catalog.Embedded()
	if err != nil {
		return err
	}
	ws, err := catalog.Wrappers()
	if err != nil {
		return err
	}
	role, kinds, err := rbacgen.CatalogReadRole(defs, rbacgen.CatalogWrappers(ws)...)
	if err != nil {
		return err
	}
	out, err := rbacgen.Render(role, kinds)
	if err != nil {
		return err
	}
	stale := 0
	for _, p := range paths {
		if check {
			cur, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(cur, out) {
				fmt.Fprintf(os.Stderr, "%s is out of date with the catalog; run make rbac\n", p)
				stale++
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return err
		}
	}
	if stale > 0 {
		return fmt.Errorf("%d file(s) out of date", stale)
	}
	return nil
}

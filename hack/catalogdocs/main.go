// Command catalogdocs writes the catalog table (catalog/README.md) from the
// summary annotations of the embedded definitions. make catalog-docs runs it;
// a test in package catalog fails when the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/muster-io/muster/catalog"
)

func main() {
	out := flag.String("o", "catalog/README.md", "file to write")
	flag.Parse()
	data, err := catalog.RenderDocs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalogdocs:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "catalogdocs:", err)
		os.Exit(1)
	}
}

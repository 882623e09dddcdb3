#!/usr/bin/env bash
# Lists the packages whose tests need no control plane: those that do not
# link localcluster (the in-process etcd, kube-apiserver and controllers)
# through their tests. make unit runs these with -short.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -test -f '{{if and (not .ForTest) (eq .Name "main")}}{{.ImportPath}} {{join .Deps " "}}{{end}}' ./... |
	awk '$1 ~ /\.test$/ {
		heavy = 0
		for (i = 2; i <= NF; i++) if ($i == "github.com/muster-io/muster/localcluster") heavy = 1
		if (!heavy) { sub(/\.test$/, "", $1); print $1 }
	}'

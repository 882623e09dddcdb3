package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/muster-io/muster/internal/version"
)

const versionExample = `  # Client and server versions
  muster version

  # Only the client, without contacting a cluster
  muster version --client -o json`

// NewCmdVersion returns the version command.
func NewCmdVersion(env *Env) *cobra.Command {
	var client bool
	output := "table"
	cmd := &cobra.Command{
		Use:                   "version [--client] [-o table|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the muster version and the cluster's Kubernetes version",
		Long:                  "Print the muster version and, when a cluster is configured and reachable, its Kubernetes version. An unreachable cluster is reported but is not an error.",
		Example:               versionExample,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(output); err != nil {
				return err
			}
			info := VersionInfo{Client: version.Version}
			if !client {
				info.Server, info.ServerError = serverVersion(cmd.Context(), env)
			}
			if output == "json" || output == "yaml" {
				return printData(env.Streams.Out, output, info)
			}
			fmt.Fprintf(env.Streams.Out, "Client Version: %s\n", info.Client)
			switch {
			case info.Server != "":
				fmt.Fprintf(env.Streams.Out, "Server Version: %s\n", info.Server)
			case !client:
				fmt.Fprintf(env.Streams.Out, "Server Version: unknown (%s)\n", info.ServerError)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&client, "client", false, "Print only the client version")
	addOutputFlag(cmd, &output)
	return cmd
}

func serverVersion(ctx context.Context, env *Env) (string, string) {
	c, err := env.Cluster()
	if err != nil {
		return "", oneLine(err.Error())
	}
	if c.Discovery == nil {
		return "", "no discovery client"
	}
	v, err := c.Discovery.ServerVersion()
	if err != nil {
		return "", oneLine(apiError("read the server version", err).Error())
	}
	return v.GitVersion, ""
}

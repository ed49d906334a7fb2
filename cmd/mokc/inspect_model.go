package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// inspectModel prints the layer of --model or --hf-config and the schedule
// chosen for each target.
func inspectModel(c *cli.Context) error {
	return errors.New("inspect: not implemented yet")
}

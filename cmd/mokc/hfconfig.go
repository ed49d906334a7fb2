package main

import (
	"github.com/mokc/mokc/schedule"
)

// loadHFConfig reads a Hugging Face config.json into a layer.
func loadHFConfig(path string) (schedule.Layer, error) {
	return schedule.LoadHFConfig(path)
}

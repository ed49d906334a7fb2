package selftest

import (
	llir "github.com/llir/llvm/ir"

	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// ourCompiler lowers a module to PTX for a target with mokc's backend
// (package ptx).
var ourCompiler = func(m *llir.Module, tg target.Target) (string, error) {
	return ptx.Compile(m, tg)
}

// CompileOurs returns the PTX of c from mokc's backend.
func CompileOurs(c Case) (string, error) { return compileOurs(c) }

func compileOurs(c Case) (string, error) {
	m, err := c.Build()
	if err != nil {
		return "", err
	}
	return ourCompiler(m, c.Target)
}

package selftest

import llir "github.com/llir/llvm/ir"

// ourCompiler lowers a module to PTX for a target with mokc's backend
// (package ptx); nil while that backend is not wired in, in which case only
// llc-19's PTX is checked.
var ourCompiler func(m *llir.Module, target string) (string, error)

// CompileOurs returns the PTX of c from mokc's backend, or "" when it is not
// wired in.
func CompileOurs(c Case) (string, error) { return compileOurs(c) }

func compileOurs(c Case) (string, error) {
	if ourCompiler == nil {
		return "", nil
	}
	m, err := c.Build()
	if err != nil {
		return "", err
	}
	return ourCompiler(m, c.Target)
}

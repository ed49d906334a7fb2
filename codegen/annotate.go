package codegen

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/metadata"
)

// kernelAnnotate adds !{ptr @f, !"kernel", i32 1, !"maxntidx", i32 threads}
// to the module's !nvvm.annotations (the NVVM kernel convention, one tuple
// per kernel as package ir writes it).
func kernelAnnotate(m *llir.Module, f *llir.Func, threads int) {
	nd, ok := m.NamedMetadataDefs["nvvm.annotations"]
	if !ok {
		nd = &metadata.NamedDef{Name: "nvvm.annotations"}
		m.NamedMetadataDefs["nvvm.annotations"] = nd
	}
	fields := []metadata.Field{f, &metadata.String{Value: "kernel"}, I32c(1)}
	if threads > 0 {
		fields = append(fields, &metadata.String{Value: "maxntidx"}, I32c(int64(threads)))
	}
	t := &metadata.Tuple{MetadataID: -1, Fields: fields}
	m.MetadataDefs = append(m.MetadataDefs, t)
	nd.Nodes = append(nd.Nodes, t)
}

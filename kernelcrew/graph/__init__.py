"""The crew's state machine: state, nodes, routing, build_graph()."""

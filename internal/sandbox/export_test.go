package sandbox

// NextPortName is the host veth port name m's next container gets.
func NextPortName(m *Manager) string { return m.portName(instanceSeq.Load() + 1) }

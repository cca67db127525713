//! The names of the built-in tools that need no phone, which skills name in
//! their `allowed-tools` too.

/// Name of the clock tool.
pub const TIME_TOOL: &str = "current_time";
/// Name of the calculator tool.
pub const CALCULATOR_TOOL: &str = "calculator";

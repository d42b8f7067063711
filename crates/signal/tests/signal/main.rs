//! Integration tests for ralph-signal: fixtures at every split point, targeted cases per
//! format, memory bounds, properties, and (ignored) throughput measurements.

mod agents;
mod claude;
mod fixtures;
mod memory;
mod props;
mod text;
mod throughput;
mod util;

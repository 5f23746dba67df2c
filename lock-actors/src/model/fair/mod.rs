//! The fair lock, model-checked: its keys and scripts as pure functions (`store`, each
//! checked against its Lua on a real Redis by `mirror`), clients that wait in its queue as
//! the library's fair lock actor does (`model`), and the properties and bounds checked,
//! with negative controls (`checks`).

mod checks;
mod mirror;
mod model;
mod store;

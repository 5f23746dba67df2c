//! The fair lock, model-checked: the store and its script mirrors (`store`, checked against
//! the Lua by `mirror`), and the model of clients that wait in its queue (`model`).

mod mirror;
mod store;

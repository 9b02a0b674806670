//! The Karmada controllers, one module per controller.

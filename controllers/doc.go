// Package controllers wires bex's reconcilers into a controller-runtime
// manager: NewScheme knows every kind they read, Setup registers one
// reconciler per root kind (each in its own package below this one).
//
// Reconcilers are level-based: they read the world, compute, and write, and
// report what a user must see in the object's conditions.
package controllers

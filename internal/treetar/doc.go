// Package treetar copies a directory tree of a tenant's as a tar stream, in
// and out of an os.Root: the builder hands a build's checkout to the place
// its steps run (a Pod of the tenant, builder/buildagent) and takes the tree
// the steps left back the same way.
//
// Both sides treat the stream as the tenant's: Write never follows a
// symbolic link (a link is sent as a link), and Extract writes only through
// the os.Root it is given, so no entry, nor a link an earlier entry made,
// leads it outside; it takes directories, regular files and symbolic links
// only, keeps permission bits but no set-id bits, and stops with an error
// naming the limit at Limits' bytes or entries.
package treetar

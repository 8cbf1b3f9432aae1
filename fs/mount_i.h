/*
 * `tracefs mount` and `tracefs umount`: the FUSE daemon serving a trace's virtual tree
 * (vtree.c) read-only through the libfuse3 low-level API, and its command-line front.
 */
#ifndef TFS_FS_MOUNT_I_H
#define TFS_FS_MOUNT_I_H

/* argv[0] is "mount" / "umount". @return the process exit status */
int fs_cmd_mount(int argc, char **argv);
int fs_cmd_umount(int argc, char **argv);

#endif

package slipstream.jvm;

import java.io.DataOutput;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (`file:`) with a file's permissions set and its links resolved in
 * this process. Without Hadoop's native library (a PySpark installed from PyPI has none) Hadoop
 * starts a `chmod` for every file and directory it creates, and its FileContext a `readlink` for
 * every rename: every checkpoint file Spark writes (offset, commit and source logs, state-store
 * files, each with its checksum file) cost two to four processes started from the driver's JVM.
 * A file's status is read with one `stat` (Hadoop's takes five, and parses its path twice),
 * which the file source pays for every file of its directory every batch; its permissions are
 * read when asked for, as Hadoop's, but without starting an `ls`. Everything else is Hadoop's
 * own: checksum files, renames. A sticky bit, which Java cannot set, a path that is a symbolic
 * link, and a status Java cannot read take Hadoop's own way.
 *
 * <p>`fs.file.impl` names this class, `fs.AbstractFileSystem.file.impl` its {@link Context}.
 */
public class LocalFiles extends LocalFileSystem {
  public LocalFiles() {
    super(new Raw());
  }

  /**
   * The raw local file system (no checksums) with a file's permissions, links and status
   * handled in this process.
   */
  public static class Raw extends RawLocalFileSystem {
    private long blockSize;

    @Override
    public void initialize(URI uri, Configuration conf) throws IOException {
      super.initialize(uri, conf);
      blockSize = getDefaultBlockSize(new Path(uri)); // as Hadoop's, once
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
      try {
        return status(pathToFile(f));
      } catch (FileNotFoundException e) {
        throw new FileNotFoundException("File " + f + " does not exist");
      } catch (IOException e) { // e.g. a directory on the way that may not be searched
        return super.getFileStatus(f);
      }
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
      File dir = pathToFile(f);
      String[] names = dir.isDirectory() ? dir.list() : null;
      if (names == null) { // a file, a missing path, a directory that cannot be read
        return super.listStatus(f);
      }
      List<FileStatus> statuses = new ArrayList<>(names.length);
      for (String name : names) {
        try {
          statuses.add(status(new File(dir, name)));
        } catch (FileNotFoundException e) {
          // gone since the directory was read, as Hadoop's skips it
        } catch (IOException e) {
          return super.listStatus(f);
        }
      }
      return statuses.toArray(new FileStatus[0]);
    }

    /** Hadoop's status of `file` (its links followed) from one `stat`. */
    private FileStatus status(File file) throws IOException {
      BasicFileAttributes a;
      try {
        a = Files.readAttributes(file.toPath(), BasicFileAttributes.class);
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + file + " does not exist");
      }
      Path path = new Path(file.getPath()).makeQualified(getUri(), getWorkingDirectory());
      return new Listed(a, blockSize, path, this);
    }

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + p + " does not exist");
      } catch (UnsupportedOperationException e) { // a file system without POSIX permissions
        super.setPermission(p, permission);
      }
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      if (Files.isSymbolicLink(pathToFile(f).toPath())) {
        return super.getFileLinkStatus(f);
      }
      return getFileStatus(f); // FileNotFoundException when it is missing, as Hadoop's
    }

    FileStatus superStatus(Path f) throws IOException {
      return super.getFileStatus(f);
    }

    static Set<PosixFilePermission> posix(short mode) {
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      PosixFilePermission[] bits = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
        PosixFilePermission.OWNER_READ,
      };
      for (int i = 0; i < bits.length; i++) {
        if ((mode & (1 << i)) != 0) {
          set.add(bits[i]);
        }
      }
      return set;
    }
  }

  /**
   * A local file's status whose permission, owner and group are read when first asked for (as
   * Hadoop's own local status, which starts `ls -ld` for them without its native library).
   */
  static final class Listed extends FileStatus {
    private static final long serialVersionUID = 1L;
    private final transient Raw fs;
    private volatile boolean loaded;

    Listed(BasicFileAttributes a, long blockSize, Path path, Raw fs) {
      super(a.size(), a.isDirectory(), 1, blockSize, a.lastModifiedTime().toMillis(),
          a.lastAccessTime().toMillis(), null, null, null, path);
      this.fs = fs;
    }

    @Override
    public FsPermission getPermission() {
      load();
      return super.getPermission();
    }

    @Override
    public String getOwner() {
      load();
      return super.getOwner();
    }

    @Override
    public String getGroup() {
      load();
      return super.getGroup();
    }

    @Override
    public void write(DataOutput out) throws IOException {
      load();
      super.write(out);
    }

    private synchronized void load() {
      if (loaded) {
        return;
      }
      try {
        Map<String, Object> unix =
            Files.readAttributes(
                new File(getPath().toUri().getPath()).toPath(), "unix:mode,owner,group");
        setPermission(new FsPermission((short) (((Integer) unix.get("mode")) & 01777)));
        setOwner(((UserPrincipal) unix.get("owner")).getName());
        setGroup(((UserPrincipal) unix.get("group")).getName());
      } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
        FileStatus hadoops; // Hadoop's own way (`ls -ld`)
        try {
          if (fs == null) { // a status sent to another process
            throw new IOException(e);
          }
          hadoops = fs.superStatus(getPath());
        } catch (IOException notFound) {
          throw new RuntimeException(
              "Error while reading the permissions of " + getPath(), notFound);
        }
        setPermission(hadoops.getPermission());
        setOwner(hadoops.getOwner());
        setGroup(hadoops.getGroup());
      }
      loaded = true;
    }
  }

  /** FileContext's `file:` (Hadoop's LocalFs: checksums over the raw file system), over {@link Raw}. */
  public static class Context extends ChecksumFs {
    public Context(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawContext(uri, conf));
    }
  }

  /** Hadoop's RawLocalFs over {@link Raw} (its constructors are not public). */
  static final class RawContext extends DelegateToFileSystem {
    RawContext(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1; // no default port for file:///
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true; // any local path, as Hadoop's RawLocalFs
    }
  }
}

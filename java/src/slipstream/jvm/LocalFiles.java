package slipstream.jvm;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
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
 * Everything else is Hadoop's own: checksum files, renames, listing. A sticky bit, which Java
 * cannot set, and a path that is a symbolic link take Hadoop's own way.
 *
 * <p>`fs.file.impl` names this class, `fs.AbstractFileSystem.file.impl` its {@link Context}.
 */
public class LocalFiles extends LocalFileSystem {
  public LocalFiles() {
    super(new Raw());
  }

  /** The raw local file system (no checksums) with the two calls made in this process. */
  public static class Raw extends RawLocalFileSystem {
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

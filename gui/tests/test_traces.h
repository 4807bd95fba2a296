// Traces the GUI tests open: a real one recorded from samples/train_mlp (made once per test
// binary, in its own directory) and broken files. The sample links Tidemark::autostart, so
// TIDEMARK_OUTPUT records and finalizes it as `tidemark record` would, without needing the CLI.
#pragma once

#include <sqlite3.h>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QTest>

namespace tidemark::gui::testing {

inline QString test_dir() {
  QDir().mkpath(TIDEMARK_TEST_DIR);
  return TIDEMARK_TEST_DIR;
}

// samples/train_mlp 20, recorded and finalized, once per test process (a file left by an
// earlier build may have another schema or come from other code). Empty on failure (the test
// then fails, after printing the sample's output). `stacks`: native frames per stack
// (TIDEMARK_STACKS; 0, the default, records none), in a file of its own.
inline QString recorded_trace(int stacks = 0) {
  const QString path = test_dir() + (stacks ? QString("/train_mlp_stacks%1.db").arg(stacks)
                                            : QString("/train_mlp.db"));
  static QList<int> recorded;
  if (recorded.contains(stacks) && QFile::exists(path)) return path;
  for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
  recorded.append(stacks);
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("TIDEMARK_OUTPUT", path);
  if (stacks) env.insert("TIDEMARK_STACKS", QString::number(stacks));
  p.setProcessEnvironment(env);
  p.start(TIDEMARK_TRAIN_MLP, {"20"});
  if (!p.waitForFinished(300000) || p.exitCode() != 0 || !QFile::exists(path)) {
    qWarning("recording train_mlp failed: %s", p.readAll().constData());
    QFile::remove(path);
    return {};
  }
  return path;
}

#ifdef TIDEMARK_CLI
// `program args...` recorded with `tidemark record --stacks 32` into the test's directory as
// `name` (once per test process). Empty on failure, after printing the recorder's output.
inline QString cli_recorded_trace(const QString& name, const QString& program,
                                  const QStringList& args = {}) {
  const QString path = test_dir() + "/" + name;
  static QStringList recorded;
  if (recorded.contains(name) && QFile::exists(path)) return path;
  for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(path + suffix);
  recorded.append(name);
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(TIDEMARK_CLI, QStringList{"record", "--stacks", "32", "-o", path, "--", program} + args);
  if (!p.waitForFinished(300000) || p.exitCode() != 0 || !QFile::exists(path)) {
    qWarning("recording %s failed: %s", qPrintable(program), p.readAll().constData());
    QFile::remove(path);
    return {};
  }
  return path;
}
#endif

inline QString write_file(const QString& name, const QByteArray& bytes) {
  const QString path = test_dir() + "/" + name;
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return {};
  f.write(bytes);
  return path;
}

// A real trace with its middle overwritten by junk: the header says SQLite, the pages do not.
inline QString corrupt_trace(const QString& real) {
  QFile f(real);
  if (!f.open(QIODevice::ReadOnly)) return {};
  QByteArray bytes = f.readAll();
  for (qsizetype i = 100; i < bytes.size(); i += 7) bytes[i] = char(0xA5 ^ (i & 0xff));
  return write_file("corrupt.db", bytes);
}

// An SQLite database that is not a Tidemark trace, or a copy of a real one claiming a newer
// schema (PRAGMA user_version).
inline QString sqlite_file(const QString& name, const QString& copy_of, int user_version) {
  const QString path = test_dir() + "/" + name;
  QFile::remove(path);
  if (!copy_of.isEmpty() && !QFile::copy(copy_of, path)) return {};
  sqlite3* db = nullptr;
  if (sqlite3_open(path.toUtf8().constData(), &db) != SQLITE_OK) return {};
  const QByteArray sql =
      copy_of.isEmpty()
          ? QByteArray("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');")
          : QByteArray("PRAGMA user_version = ") + QByteArray::number(user_version) + ";";
  const int rc = sqlite3_exec(db, sql.constData(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return rc == SQLITE_OK ? path : QString();
}

}  // namespace tidemark::gui::testing

// Tools > Predict (docs/gui.md, docs/predict.md): the peak of a program against the size that
// varies, from runs at two or more sizes (profiler/predict). The curve is computed off the GUI
// thread (predict_curve); PredictionWidget draws the predicted requested and reserved peaks,
// the runs' own sizes, the capacity line and where the program stops fitting.
#pragma once

#include <QString>
#include <QWidget>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tidemark::gui {

struct PredictionPoint {
  double x = 0;
  uint64_t requested = 0, reserved = 0;
  bool run = false;  // one of the recorded runs' sizes
  std::optional<bool> fits;
};

struct PredictionCurve {
  QString device, settings;             // settings: PYTORCH_CUDA_ALLOC_CONF text, "(defaults)"
  std::vector<PredictionPoint> points;  // by x
  std::optional<uint64_t> capacity;
  std::optional<double> largest_fitting;  // with a capacity: the largest whole size that fits
  bool capped = false;                    // ... still fitting at the end of the search
  double aligned_share = 0;               // at the largest point
  QStringList notes;
  QString error;  // a run refused, an unreadable trace: one line; nothing else is set
};

// The predicted peaks of `runs` (size, trace path) from the smallest run's size to four times
// the largest (past the largest fitting size when it is further), under `alloc_conf` (empty:
// as recorded) and `capacity` (a size such as 80GiB; empty: the largest run's device, if
// recorded). Blocks: the window runs it off the GUI thread.
PredictionCurve predict_curve(const std::vector<std::pair<double, QString>>& runs,
                              const QString& capacity, const QString& alloc_conf, int points = 24);

// The size a trace's file name ends in, if any ("b64.db", "run_seq2048.pickle.db": 64, 2048).
std::optional<double> size_in_file_name(const QString& path);

class PredictionWidget : public QWidget {
  Q_OBJECT
 public:
  explicit PredictionWidget(QWidget* parent = nullptr);
  void setCurve(PredictionCurve curve);
  const PredictionCurve& curve() const { return curve_; }
  // The line under the chart: where it stops fitting, or why nothing is drawn.
  QString caption() const;
  QSize sizeHint() const override { return {900, 520}; }

  // Where a value lands (widget coordinates), for tests.
  QPointF toWidget(double x, double bytes) const;

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  QRectF plotArea() const;
  double maxBytes() const;
  PredictionCurve curve_;
};

}  // namespace tidemark::gui

#include "gui/pages/prediction_widget.h"

#include <QFileInfo>
#include <QPainter>
#include <QPainterPath>
#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <exception>

#include "profiler/analysis/trace.h"
#include "profiler/naming/units.h"
#include "profiler/predict/predict.h"

namespace tidemark::gui {

namespace pr = tidemark::predict;
namespace rp = tidemark::replay;

namespace {

QString bytes_text(double b) {
  return QString::fromStdString(analysis::format_bytes(static_cast<int64_t>(std::llround(b))));
}

QString value_text(double x) {
  return x == std::floor(x) ? QString::number(static_cast<qlonglong>(x))
                            : QString::number(x, 'g', 6);
}

}  // namespace

std::optional<double> size_in_file_name(const QString& path) {
  static const QRegularExpression number(QStringLiteral("(\\d+(?:\\.\\d+)?)"));
  const QString name = QFileInfo(path).fileName();
  std::optional<double> last;
  for (auto it = number.globalMatch(name); it.hasNext();) last = it.next().captured(1).toDouble();
  if (last && *last > 0) return last;
  return std::nullopt;
}

PredictionCurve predict_curve(const std::vector<std::pair<double, QString>>& runs_in,
                              const QString& capacity_text, const QString& alloc_conf,
                              int npoints) {
  PredictionCurve out;
  try {
    std::vector<analysis::Trace> traces;
    traces.reserve(runs_in.size());
    for (const auto& [x, path] : runs_in)
      traces.push_back(analysis::Trace::open(path.toStdString()));
    std::vector<pr::Run> runs;
    for (size_t i = 0; i < runs_in.size(); ++i) runs.push_back({runs_in[i].first, &traces[i], ""});
    pr::Model model = pr::Model::build(runs);
    pr::Options options;
    options.sites = 0;
    rp::Settings s;
    s.conf = alloc_conf.trimmed().isEmpty() ? model.recorded_settings()
                                            : rp::parse_alloc_conf(alloc_conf.toStdString());
    options.settings.push_back(s);
    if (!capacity_text.trimmed().isEmpty()) {
      auto bytes = analysis::parse_size(capacity_text.trimmed().toStdString());
      if (!bytes) {
        out.error =
            QObject::tr("capacity %1: expected a size such as 80GB or 40GiB").arg(capacity_text);
        return out;
      }
      options.capacity = *bytes;
    }
    out.capacity = options.capacity ? options.capacity : model.recorded_capacity();
    out.device = QString::fromStdString(model.device());
    out.settings =
        s.conf.text().empty() ? QObject::tr("(defaults)") : QString::fromStdString(s.conf.text());
    const std::vector<double> xs = model.xs();
    double hi = 4 * model.largest_x();
    if (out.capacity) {
      const auto f = model.largest_fitting(*out.capacity, options).front();
      out.largest_fitting = f.x;
      out.capped = f.capped;
      if (f.x && !f.capped) hi = std::max(hi, 1.25 * *f.x);
    }
    // The runs' sizes, and a geometric grid from the smallest to `hi`.
    std::vector<std::pair<double, bool>> at;
    for (double x : xs) at.emplace_back(x, true);
    const double lo = xs.front();
    for (int i = 0; i < npoints; ++i)
      at.emplace_back(lo * std::pow(hi / lo, static_cast<double>(i) / (npoints - 1)), false);
    if (out.largest_fitting) at.emplace_back(*out.largest_fitting, false);
    std::sort(at.begin(), at.end());
    for (const auto& [x, is_run] : at) {
      if (!out.points.empty() && std::fabs(out.points.back().x - x) < 1e-9 * x) {
        out.points.back().run = out.points.back().run || is_run;
        continue;
      }
      const pr::Target t = model.at(x, options);
      PredictionPoint p;
      p.x = x;
      p.requested = t.peak_requested;
      p.reserved = t.settings.front().peak_reserved;
      p.fits = t.settings.front().fits;
      p.run = is_run;
      out.points.push_back(p);
      out.aligned_share = t.aligned_share;
    }
    for (const std::string& n : model.notes()) out.notes << QString::fromStdString(n);
  } catch (const std::exception& e) {
    out = PredictionCurve{};
    out.error = QString::fromStdString(e.what()).replace('\n', ' ');
  }
  return out;
}

PredictionWidget::PredictionWidget(QWidget* parent) : QWidget(parent) {
  setMinimumSize(400, 260);
  setAutoFillBackground(true);
}

void PredictionWidget::setCurve(PredictionCurve curve) {
  curve_ = std::move(curve);
  update();
}

QString PredictionWidget::caption() const {
  if (!curve_.error.isEmpty()) return tr("Prediction failed: %1").arg(curve_.error);
  if (curve_.points.empty()) return tr("No prediction yet.");
  QString s = tr("%1, %2; %3% of the largest point's peak aligned with the runs")
                  .arg(curve_.device, curve_.settings)
                  .arg(100 * curve_.aligned_share, 0, 'f', 1);
  if (!curve_.capacity)
    return s + tr(". Capacity unknown: give one to see where it stops fitting.");
  if (!curve_.largest_fitting)
    return s + tr(". Not even the smallest size fits %1.").arg(bytes_text(*curve_.capacity));
  return s + tr(". Fits %1 up to %2%3.")
                 .arg(bytes_text(*curve_.capacity), value_text(*curve_.largest_fitting),
                      curve_.capped ? tr(" and beyond") : QString());
}

QRectF PredictionWidget::plotArea() const {
  return QRectF(90, 20, width() - 120, height() - 70);
}

double PredictionWidget::maxBytes() const {
  double m = curve_.capacity ? static_cast<double>(*curve_.capacity) : 0;
  for (const PredictionPoint& p : curve_.points)
    m = std::max({m, static_cast<double>(p.reserved), static_cast<double>(p.requested)});
  return m > 0 ? m * 1.08 : 1;
}

QPointF PredictionWidget::toWidget(double x, double bytes) const {
  const QRectF r = plotArea();
  const double x0 = curve_.points.empty() ? 0 : curve_.points.front().x;
  const double x1 = curve_.points.empty() ? 1 : std::max(curve_.points.back().x, x0 + 1e-9);
  return {r.left() + (x - x0) / (x1 - x0) * r.width(),
          r.bottom() - bytes / maxBytes() * r.height()};
}

void PredictionWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF r = plotArea();
  const QColor text = palette().color(QPalette::WindowText);
  p.setPen(text);
  if (curve_.points.empty()) {
    p.drawText(rect(), Qt::AlignCenter, caption());
    return;
  }
  // Axes, with a few labels on each.
  p.drawLine(r.bottomLeft(), r.bottomRight());
  p.drawLine(r.bottomLeft(), r.topLeft());
  const double top = maxBytes();
  for (int i = 0; i <= 4; ++i) {
    const double b = top * i / 4;
    const QPointF at = toWidget(curve_.points.front().x, b);
    p.drawText(QRectF(0, at.y() - 8, r.left() - 6, 16), Qt::AlignRight | Qt::AlignVCenter,
               bytes_text(b));
  }
  for (const PredictionPoint& pt : curve_.points) {
    if (!pt.run) continue;
    const QPointF at = toWidget(pt.x, 0);
    p.drawText(QRectF(at.x() - 40, r.bottom() + 4, 80, 16), Qt::AlignCenter, value_text(pt.x));
  }
  const QPointF end = toWidget(curve_.points.back().x, 0);
  p.drawText(QRectF(end.x() - 60, r.bottom() + 20, 120, 16), Qt::AlignCenter,
             value_text(curve_.points.back().x));
  // The capacity, and where the reserved peak crosses it.
  if (curve_.capacity) {
    const double y = toWidget(0, static_cast<double>(*curve_.capacity)).y();
    p.setPen(QPen(QColor(200, 40, 40), 2, Qt::DashLine));
    p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
    p.drawText(QPointF(r.left() + 6, y - 4),
               tr("capacity %1").arg(bytes_text(static_cast<double>(*curve_.capacity))));
    if (curve_.largest_fitting && !curve_.capped) {
      const double x = toWidget(*curve_.largest_fitting, 0).x();
      p.setPen(QPen(QColor(200, 40, 40), 1, Qt::DotLine));
      p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
      p.drawText(QPointF(x + 4, r.top() + 14),
                 tr("fits up to %1").arg(value_text(*curve_.largest_fitting)));
    }
  }
  // The curves: reserved solid, requested dashed; the runs' sizes as dots.
  auto line = [&](auto value, const QPen& pen) {
    QPainterPath path;
    for (size_t i = 0; i < curve_.points.size(); ++i) {
      const QPointF at = toWidget(curve_.points[i].x, static_cast<double>(value(curve_.points[i])));
      i == 0 ? path.moveTo(at) : path.lineTo(at);
    }
    p.setPen(pen);
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
  };
  const QColor reserved(40, 90, 200), requested(40, 150, 90);
  line([](const PredictionPoint& q) { return q.reserved; }, QPen(reserved, 2));
  line([](const PredictionPoint& q) { return q.requested; }, QPen(requested, 2, Qt::DashLine));
  p.setPen(Qt::NoPen);
  for (const PredictionPoint& pt : curve_.points) {
    if (!pt.run) continue;
    p.setBrush(reserved);
    p.drawEllipse(toWidget(pt.x, static_cast<double>(pt.reserved)), 4, 4);
    p.setBrush(requested);
    p.drawEllipse(toWidget(pt.x, static_cast<double>(pt.requested)), 4, 4);
  }
  // Legend and caption.
  p.setPen(text);
  const QRectF legend(r.right() - 260, r.top(), 260, 40);
  p.setPen(QPen(reserved, 2));
  p.drawLine(QPointF(legend.left(), legend.top() + 8),
             QPointF(legend.left() + 24, legend.top() + 8));
  p.setPen(QPen(requested, 2, Qt::DashLine));
  p.drawLine(QPointF(legend.left(), legend.top() + 26),
             QPointF(legend.left() + 24, legend.top() + 26));
  p.setPen(text);
  p.drawText(QPointF(legend.left() + 30, legend.top() + 12), tr("peak reserved (replayed)"));
  p.drawText(QPointF(legend.left() + 30, legend.top() + 30), tr("peak requested; dots: the runs"));
  p.drawText(QRectF(10, height() - 22, width() - 20, 20), Qt::AlignLeft | Qt::AlignVCenter,
             caption());
}

}  // namespace tidemark::gui

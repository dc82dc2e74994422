// Phone navigation and the desktop sidebar toggle for sphinx-book-theme 1.3.0 on pydata-sphinx-theme
// 0.17.1. Upstream bug: pydata-sphinx-theme #2451 (also reported as sphinx-book-theme #988). Since
// pydata-sphinx-theme 0.17.0 a page has two buttons with class `primary-toggle` (one in the theme's
// header, one in the book theme's article header) and two with `secondary-toggle`; both themes attach
// their click handlers with `document.querySelector`, i.e. to the first button only, which the book
// theme hides. The visible ☰ and "On this page" buttons therefore do nothing: on a phone the sidebar
// dialog never opens, on a desktop ☰ never collapses the sidebar.
// The shim forwards a click on any other toggle to the first one, so the themes' own handlers run
// (open the dialog on narrow screens, collapse the sidebar on wide ones). Remove it when the pinned
// themes bind every toggle; tools/site_check.py checks that the buttons work either way. On a touch
// screen a tap leaves the toggle's tooltip up once its dialog closes, over the page, where it takes the
// next tap: shardbook.css hides tooltips where nothing can hover, and the site check taps to see.
(function () {
  function forwardClicks(selector) {
    var buttons = document.querySelectorAll(selector);
    if (buttons.length < 2) return;
    var handled = buttons[0];
    for (var i = 1; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        handled.click();
      });
    }
  }
  function setup() {
    forwardClicks(".primary-toggle");
    forwardClicks(".secondary-toggle");
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();

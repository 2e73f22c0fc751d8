// scripts/measure/capture_programs/FillList.java -- a JVM that fills a list
// with 2,000,000 strings and holds it for 3 s: most of its memory is the
// JVM's own (its heap and class-data archive in its own mappings), a little
// is malloc's.  docs/capture.md captures it:
//   javac -d /tmp FillList.java
//   allocsim capture --db java.db -- java -cp /tmp FillList
import java.util.ArrayList;
import java.util.List;

public class FillList {
  public static void main(String[] args) throws InterruptedException {
    List<String> list = new ArrayList<>();
    for (int i = 0; i < 2000000; i++)
      list.add("s" + i);
    System.out.println(list.size());
    Thread.sleep(3000);
  }
}
